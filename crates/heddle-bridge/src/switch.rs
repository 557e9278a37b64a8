//! Live control of a running bridge: STATUS, PAUSE_RESUME, measurements, and the
//! transport switch, by hand or by policy, of
//! `spec/bridge.md` §6 (CHANGE_BRIDGE_TYPE), which loses, duplicates and reorders nothing.

use std::time::{Duration, Instant};

use crate::control::{FilterMsg, FilterStatus, HostMsg};
use crate::framing::FrameWriter;
use crate::host::Bridge;
use crate::transport::{Channel, Endpoint};
use crate::{Diagnostics, Error, Result, Transport};

impl Bridge {
    /// Moves the bridge to transport `to` while it runs and returns how long the switch
    /// took. Sending waits meanwhile; record numbers and credits carry over.
    ///
    /// # Errors
    /// [`Error::Filter`] when the filter does not follow the handshake within
    /// `start_timeout`.
    pub fn switch(&self, to: Transport) -> Result<Duration> {
        let t0 = Instant::now();
        let mut w = self.writer();
        if w.transport == to {
            return Ok(Duration::ZERO);
        }
        let epoch = w.epoch + 1;
        let endpoint = Endpoint::prepare(to, self.dir.path(), epoch)?;
        let msg = HostMsg::ChangeBridgeType {
            epoch,
            transport: to.name().into(),
            address: endpoint.address(),
        };
        w.fw.control(&msg.to_json()).map_err(|e| self.fail_with(e))?;
        w.fw.flush().map_err(|e| self.fail_with(e))?;
        let deadline = Instant::now() + self.cfg.start_timeout;
        let (old_read, next_seq) =
            self.wait_for(Some(deadline), "the filter's last frame on the old channel", |s| {
                s.switch_ack.take_if(|a| a.0 == epoch).map(|(_, r, seq)| (r, seq))
            })?;
        let mut endpoint = endpoint;
        let channel = if to == Transport::Pipe {
            w.parked_pipe
                .take()
                .ok_or_else(|| Error::Config("the filter's pipes are gone".into()))?
        } else {
            endpoint.accept(deadline, self.cfg.start_timeout, self.pid(), &mut || Ok(()))?
        };
        let probe = channel.probe;
        let (frames, hello) = self
            .first_message(channel.read, channel.read_fd, deadline)
            .map_err(|e| self.fail_with(e))?;
        endpoint.handshake_done();
        match hello {
            FilterMsg::ChangeBridgeType { epoch: e, token: Some(t) } if e == epoch && self.token_ok(&t) => {}
            other => {
                return Err(self.fail_with(Error::protocol(
                    "§6",
                    format!("the first message on the new channel is {other:?}, not CHANGE_BRIDGE_TYPE of epoch {epoch} with the token"),
                )))
            }
        }
        let mut frames = frames;
        frames.set_next_seq(next_seq);
        let reader = crate::reader::Reader { frames, probe };
        let new_fw = FrameWriter::new(channel.write, self.cfg.bridge_id, self.cfg.frame_payload);
        let old_fw = std::mem::replace(&mut w.fw, new_fw);
        let old_write = old_fw.into_inner().map_err(|e| self.fail_with(e))?;
        if w.transport == Transport::Pipe {
            w.parked_pipe = Some(Channel {
                read: old_read,
                write: old_write,
                read_fd: self.pipe_fd,
                probe: None,
            });
        }
        if self.next_reader.send(reader).is_err() {
            return Err(self.fail_with(Error::protocol(
                "§6",
                "the bridge's reader stopped during the switch",
            )));
        }
        w.endpoint = Some(endpoint);
        w.transport = to;
        w.epoch = epoch;
        let took = t0.elapsed();
        self.shared.lock().meter.switches.push(took);
        Ok(took)
    }

    /// Asks the filter for its counters and resources.
    ///
    /// # Errors
    /// [`Error::Filter`] when it fails or does not answer within `idle_timeout`.
    pub fn status(&self) -> Result<FilterStatus> {
        {
            let mut w = self.writer();
            w.fw.control(&HostMsg::Status.to_json()).map_err(|e| self.fail_with(e))?;
            w.fw.flush().map_err(|e| self.fail_with(e))?;
        }
        let deadline = Instant::now() + self.cfg.idle_timeout;
        match self.take_control(deadline, "STATUS from the filter", |m| {
            matches!(m, FilterMsg::Status(_))
        })? {
            FilterMsg::Status(s) => {
                self.shared.lock().meter.filter = Some(s);
                Ok(s)
            }
            _ => unreachable!("take_control returned what was asked"),
        }
    }

    /// Pauses (`true`) or resumes the filter; returns once it acknowledged.
    ///
    /// # Errors
    /// [`Error::Filter`] when it fails or does not answer within `idle_timeout`.
    pub fn set_paused(&self, paused: bool) -> Result<()> {
        {
            let mut w = self.writer();
            w.fw.control(&HostMsg::PauseResume { paused }.to_json())
                .map_err(|e| self.fail_with(e))?;
            w.fw.flush().map_err(|e| self.fail_with(e))?;
        }
        let deadline = Instant::now() + self.cfg.idle_timeout;
        self.take_control(
            deadline,
            "PAUSE_RESUME from the filter",
            |m| matches!(m, FilterMsg::PauseResume { paused: p } if *p == paused),
        )?;
        Ok(())
    }

    /// Every `check_every` records, switches the transport if the policy says so.
    pub(crate) fn apply_policy(&self, sent: u64) -> Result<()> {
        let Some(policy) = &self.cfg.policy else { return Ok(()) };
        if !sent.is_multiple_of(policy.check_every.max(1)) {
            return Ok(());
        }
        {
            let s = self.shared.lock();
            if s.meter.last_switch.is_some_and(|t| t.elapsed() < policy.cooldown) {
                return Ok(());
            }
        }
        // The descriptor walk costs a system call per descriptor: only for rules that ask.
        if let Some((to, why)) = policy.decide(&self.measure(policy.needs_resources())) {
            self.switch(to)?;
            let mut s = self.shared.lock();
            s.meter.switch_reasons.push(why);
            s.meter.last_switch = Some(Instant::now());
        }
        Ok(())
    }

    /// The bridge's measurements now.
    pub fn diagnostics(&self) -> Diagnostics {
        self.measure(true)
    }

    fn measure(&self, resources: bool) -> Diagnostics {
        let (t, e, shm) = {
            let w = self.writer();
            (w.transport, w.epoch, w.endpoint.as_ref().map_or(0, |e| e.shm_bytes() as u64))
        };
        self.shared.lock().meter.snapshot(t, e, shm, resources)
    }
}
