//! The host side of a bridge: start the filter, shake hands, stream records within credits,
//! finish or abort, and turn every way a filter can fail into one error that names it.

use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use heddle_comm::scratch::ScratchDir;

use crate::config::BridgeConfig;
use crate::control::{ErrorBody, FilterMsg, HostMsg};
use crate::diagnostics::Diagnostics;
use crate::framing::{FrameWriter, TAG_DATA};
use crate::process::{FilterCommand, FilterProcess};
use crate::reader::{self, End, Reader, Shared, State};
use crate::transport::{Channel, Endpoint};
use crate::{Error, Record, Result, Transport};

/// What a finished bridge reports.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeReport {
    /// Records the filter processed.
    pub records_in: u64,
    /// Records it emitted, `finalize` included.
    pub records_out: u64,
    /// The bridge's measurements at the end.
    pub diagnostics: Diagnostics,
}

/// The writing half and everything the switch replaces.
pub(crate) struct Writer {
    pub(crate) fw: FrameWriter<Box<dyn Write + Send>>,
    pub(crate) next_seq: u64,
    pub(crate) taken_since_grant: u32,
    pub(crate) epoch: u32,
    pub(crate) transport: Transport,
    /// The filter's standard streams while another transport is in use.
    pub(crate) parked_pipe: Option<Channel>,
    /// The current channel's endpoint (its files live as long as it).
    pub(crate) endpoint: Option<Endpoint>,
    /// COMPLETE was sent: the filter may exit at any moment, so a grant that cannot be
    /// written is no error (its exit status and counts are checked instead).
    pub(crate) finishing: bool,
    pub(crate) done: bool,
}

/// One running instance of a bridged task: a child process speaking the bridge protocol
/// (`spec/bridge.md`). Records go in with [`Bridge::send`]; results come out through the
/// sink every call takes, so a host that only sends still drains the filter.
///
/// ```no_run
/// use heddle_bridge::{Bridge, BridgeConfig, FilterCommand, Record, Transport};
/// let cmd = FilterCommand::new("python3").arg("upper.py");
/// let bridge = Bridge::start(&cmd, BridgeConfig::new("upper").transport(Transport::Unix))?;
/// let mut out = Vec::new();
/// bridge.send(Record::text("hello"), &mut |r| out.push(r))?;
/// let report = bridge.finish(&mut |r| out.push(r))?;
/// assert_eq!(report.records_in, 1);
/// # Ok::<(), heddle_bridge::Error>(())
/// ```
pub struct Bridge {
    pub(crate) cfg: BridgeConfig,
    pub(crate) label: String,
    pub(crate) command: FilterCommand,
    pub(crate) token: String,
    pub(crate) process: Mutex<FilterProcess>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) writer: Mutex<Writer>,
    pub(crate) next_reader: Sender<Reader>,
    /// The descriptor of the filter's standard output.
    pub(crate) pipe_fd: RawFd,
    pub(crate) dir: ScratchDir,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("task", &self.label)
            .field("command", &self.command.to_string())
            .finish()
    }
}

impl Bridge {
    /// Starts `command` as instance `cfg.instance` of task `cfg.task`, connects over
    /// `cfg.transport`, and returns once the filter's `init` has run.
    ///
    /// # Errors
    /// [`Error::Spawn`] if the program cannot start; [`Error::Filter`] if it exits, refuses
    /// (another protocol version, a failing `init`) or does not start within
    /// `cfg.start_timeout`.
    pub fn start(command: &FilterCommand, cfg: BridgeConfig) -> Result<Bridge> {
        let label = cfg.label();
        let dir = ScratchDir::create(&std::env::temp_dir())
            .map_err(|e| Error::io("creating the bridge's private directory", e))?;
        let token = hex::encode(rand::random::<[u8; 16]>());
        let endpoint = Endpoint::prepare(cfg.transport, dir.path(), 1)?;
        let env = [("HEDDLE_BRIDGE", endpoint.env_value()), ("HEDDLE_BRIDGE_TOKEN", token.clone())];
        let (process, stdin, stdout) = FilterProcess::spawn(command, &label, &env)?;
        let pipe_fd = stdout.as_raw_fd();
        let pipe = Channel {
            read: Box::new(stdout),
            write: Box::new(stdin),
            read_fd: pipe_fd,
            probe: None,
        };
        let (tx, rx) = crossbeam_channel::bounded::<Reader>(1);
        let writer = Writer {
            fw: FrameWriter::new(Box::new(std::io::sink()), cfg.bridge_id, cfg.frame_payload),
            next_seq: 0,
            taken_since_grant: 0,
            epoch: 1,
            transport: cfg.transport,
            parked_pipe: None,
            endpoint: None,
            finishing: false,
            done: false,
        };
        let bridge = Bridge {
            shared: Shared::new(u64::from(cfg.credits)),
            cfg,
            label,
            command: command.clone(),
            token,
            process: Mutex::new(process),
            writer: Mutex::new(writer),
            next_reader: tx,
            pipe_fd,
            dir,
        };
        let reader = bridge.handshake(endpoint, pipe).map_err(|e| bridge.fail_with(e))?;
        let shared = Arc::clone(&bridge.shared);
        std::thread::Builder::new()
            .name(format!("bridge-{}", bridge.label))
            .spawn(move || reader::run(&shared, reader, &rx))
            .map_err(|e| Error::io("starting the bridge's reader thread", e))?;
        let deadline = Instant::now() + bridge.cfg.start_timeout;
        bridge.take_control(
            deadline,
            "START_STOP from the filter",
            |m| matches!(m, FilterMsg::StartStop { state } if state == "started"),
        )?;
        Ok(bridge)
    }

    pub(crate) fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Turns `e` into the error that ends the task: the filter is stopped and its exit
    /// status and the end of its standard error are attached.
    pub(crate) fn fail_with(&self, e: Error) -> Error {
        if let Error::Filter { .. } | Error::Spawn { .. } = e {
            return e;
        }
        let e = if matches!(e, Error::Io { .. }) { self.reported_error().unwrap_or(e) } else { e };
        let mut p = self.process.lock().unwrap_or_else(PoisonError::into_inner);
        if p.wait_for(Duration::from_millis(200)).is_none() {
            p.stop(self.cfg.kill_grace);
        }
        Error::Filter {
            task: self.label.clone(),
            command: self.command.to_string(),
            what: e.to_string(),
            exit: p.describe_exit(),
            stderr_tail: p.stderr_tail(),
        }
    }

    /// The filter's own ERROR or ABORT, if it sent one (a broken channel is usually its
    /// consequence): waits briefly for the reader thread to see the end of the channel.
    fn reported_error(&self) -> Option<Error> {
        let end = Instant::now() + Duration::from_millis(300);
        let mut g = self.shared.lock();
        loop {
            let now = Instant::now();
            if g.ended.is_some() || now >= end {
                break;
            }
            g = self.shared.wait(g, now, Duration::from_millis(20));
        }
        g.controls.iter().find_map(|m| match m {
            FilterMsg::Error(b) => Some(Error::Ended(describe_error(b))),
            FilterMsg::Abort { reason } => Some(Error::Ended(format!("it aborted: {reason}"))),
            _ => None,
        })
    }

    /// Waits until `take` returns something, failing on the filter's ERROR or ABORT, on
    /// the end of its channel, or when it has been silent for `idle_timeout` (or past
    /// `deadline`).
    pub(crate) fn wait_for<T>(
        &self,
        deadline: Option<Instant>,
        what: &str,
        mut take: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<T> {
        let mut g = self.shared.lock();
        loop {
            if let Some(t) = take(&mut g) {
                return Ok(t);
            }
            if let Some(m) = g.controls.front() {
                let e = match m {
                    FilterMsg::Error(b) => Some(describe_error(b)),
                    FilterMsg::Abort { reason } => Some(format!("it aborted: {reason}")),
                    _ => None,
                };
                if let Some(e) = e {
                    drop(g);
                    return Err(self.fail_with(Error::Ended(e)));
                }
            }
            if let Some(end) = &g.ended {
                let e = match end {
                    End::Closed => Error::Ended(format!(
                        "the filter closed its channel while the host waited for {what}"
                    )),
                    End::Failed(e) => Error::Ended(e.to_string()),
                };
                drop(g);
                return Err(self.fail_with(e));
            }
            let now = Instant::now();
            self.shared.note_heard(&mut g, now);
            let idle_end = g.last_heard + self.cfg.idle_timeout;
            let end = deadline.map_or(idle_end, |d| d.min(idle_end));
            if now >= end {
                drop(g);
                let limit = if deadline.is_some_and(|d| d < idle_end) {
                    self.cfg.start_timeout
                } else {
                    self.cfg.idle_timeout
                };
                return Err(self.fail_with(Error::Timeout { what: what.to_owned(), limit }));
            }
            g = self.shared.wait(g, now, (end - now).min(Duration::from_millis(100)));
        }
    }

    /// Takes the next control message, which must satisfy `want`.
    pub(crate) fn take_control(
        &self,
        deadline: Instant,
        what: &str,
        want: impl Fn(&FilterMsg) -> bool,
    ) -> Result<FilterMsg> {
        let m = self.wait_for(Some(deadline), what, |s| {
            s.controls
                .front()
                .filter(|m| want(m))
                .is_some()
                .then(|| s.controls.pop_front())
                .flatten()
        });
        m
    }

    /// Sends one record. While the filter has no room (no credit) it passes the results
    /// that arrive to `sink`, which grants the filter room for more.
    ///
    /// # Errors
    /// [`Error::RecordTooLarge`] (nothing is sent); [`Error::Filter`] when the filter fails.
    pub fn send(&self, record: Record, sink: &mut dyn FnMut(Record)) -> Result<()> {
        let size = record.payload.len() as u64;
        loop {
            self.drain(sink)?;
            let mut w = self.writer();
            if size > self.cfg.max_record {
                return Err(Error::RecordTooLarge {
                    record: w.next_seq,
                    size,
                    limit: self.cfg.max_record,
                });
            }
            let has_credit = {
                let mut s = self.shared.lock();
                let ok = s.credits > 0;
                if ok {
                    s.credits -= 1;
                    s.meter.sent(record.payload.len());
                }
                ok
            };
            if has_credit {
                let seq = w.next_seq;
                w.fw.record(TAG_DATA, seq, &record).map_err(|e| self.fail_with(e))?;
                w.next_seq += 1;
                drop(w);
                return self.apply_policy(seq + 1);
            }
            w.fw.flush().map_err(|e| self.fail_with(e))?;
            drop(w);
            self.wait_for(None, "room to send (a credit) from the filter", |s| {
                (s.credits > 0 || !s.results.is_empty()).then_some(())
            })?;
        }
    }

    /// Sends everything buffered to the filter.
    ///
    /// # Errors
    /// [`Error::Filter`] when the channel is broken.
    pub fn flush(&self) -> Result<()> {
        self.writer().fw.flush().map_err(|e| self.fail_with(e))
    }

    /// Passes every result already received to `sink`, granting credits back; returns
    /// how many.
    ///
    /// # Errors
    /// [`Error::Filter`] when the channel is broken.
    pub fn drain(&self, sink: &mut dyn FnMut(Record)) -> Result<usize> {
        let taken: Vec<Record> = self.shared.lock().results.drain(..).collect();
        let n = taken.len();
        for r in taken {
            sink(r);
        }
        if n > 0 {
            self.granted(n)?;
        }
        Ok(n)
    }

    fn granted(&self, n: usize) -> Result<()> {
        let g = (self.cfg.credits / 2).max(1);
        let mut w = self.writer();
        if w.finishing {
            // F3: nothing follows the host's COMPLETE.
            return Ok(());
        }
        w.taken_since_grant += n as u32;
        let mut grant = false;
        let mut wrote = Ok(());
        while w.taken_since_grant >= g && wrote.is_ok() {
            w.taken_since_grant -= g;
            wrote = w.fw.credit(g);
            grant = true;
        }
        if grant && wrote.is_ok() {
            wrote = w.fw.flush();
        }
        match wrote {
            Err(_) if w.finishing => Ok(()),
            Err(e) => {
                drop(w);
                Err(self.fail_with(e))
            }
            Ok(()) => Ok(()),
        }
    }

    /// Waits up to `limit` for one result (flushing first): a round trip.
    ///
    /// # Errors
    /// [`Error::Filter`] when the filter fails or is silent past `idle_timeout`.
    pub fn recv(&self, limit: Duration) -> Result<Option<Record>> {
        self.flush()?;
        let ready = self.shared.lock().results.pop_front();
        if let Some(r) = ready {
            self.granted(1)?;
            return Ok(Some(r));
        }
        let deadline = Instant::now() + limit;
        let got = self.wait_for(Some(deadline + self.cfg.idle_timeout), "a result", |s| {
            if let Some(r) = s.results.pop_front() {
                Some(Some(r))
            } else {
                (Instant::now() >= deadline).then_some(None)
            }
        })?;
        if got.is_some() {
            self.granted(1)?;
        }
        Ok(got)
    }

    /// Ends the input: the filter runs `finalize`; every remaining result goes to `sink`.
    /// Checks the filter's counts against the host's and its exit status (0).
    ///
    /// # Errors
    /// [`Error::Filter`] when the filter fails, miscounts, or does not finish within
    /// `idle_timeout`.
    pub fn finish(&self, sink: &mut dyn FnMut(Record)) -> Result<BridgeReport> {
        {
            let mut w = self.writer();
            w.finishing = true;
            w.fw.control(&HostMsg::Complete.to_json()).map_err(|e| self.fail_with(e))?;
            w.fw.flush().map_err(|e| self.fail_with(e))?;
        }
        let (records_in, records_out) = loop {
            self.drain(sink)?;
            let done = self.wait_for(None, "COMPLETE from the filter", |s| {
                if !s.results.is_empty() {
                    return Some(None);
                }
                match s.controls.front() {
                    Some(FilterMsg::Complete { records_in, records_out }) => {
                        let c = (*records_in, *records_out);
                        s.controls.pop_front();
                        Some(Some(c))
                    }
                    Some(FilterMsg::Error(_) | FilterMsg::Abort { .. }) | None => None,
                    Some(_) => {
                        s.controls.pop_front();
                        Some(None)
                    }
                }
            })?;
            if let Some(c) = done {
                break c;
            }
        };
        self.drain(sink)?;
        let (sent, received) = {
            let s = self.shared.lock();
            (s.meter.records_sent, s.meter.records_received)
        };
        if records_in != sent || records_out != received {
            return Err(self.fail_with(Error::protocol(
                "§4.1",
                format!("the filter counted {records_in} records in and {records_out} out; the host sent {sent} and received {received}"),
            )));
        }
        self.writer().done = true;
        let status = {
            let mut p = self.process.lock().unwrap_or_else(PoisonError::into_inner);
            p.wait_for(self.cfg.idle_timeout)
        };
        match status {
            Some(s) if s.success() => {
                Ok(BridgeReport { records_in, records_out, diagnostics: self.diagnostics() })
            }
            _ => Err(self.fail_with(Error::protocol(
                "§4.1",
                "the filter did not exit with status 0 after COMPLETE",
            ))),
        }
    }

    /// Stops the filter at once, without `finalize`: ABORT, then SIGTERM and SIGKILL if
    /// it does not exit. Returns how it ended ("exited with status 3").
    pub fn abort(&self, reason: &str) -> String {
        {
            let mut w = self.writer();
            w.finishing = true;
            let _ = w.fw.control(&HostMsg::Abort { reason: reason.into() }.to_json());
            let _ = w.fw.flush();
            w.done = true;
        }
        let mut p = self.process.lock().unwrap_or_else(PoisonError::into_inner);
        if p.wait_for(self.cfg.kill_grace).is_none() {
            p.stop(self.cfg.kill_grace);
        }
        p.describe_exit()
    }

    /// The filter's process id.
    pub fn pid(&self) -> u32 {
        self.process.lock().unwrap_or_else(PoisonError::into_inner).id()
    }

    /// The transport in use.
    pub fn transport(&self) -> Transport {
        self.writer().transport
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let done = self.writer().done;
        if !done {
            self.abort("the host dropped the bridge");
        }
    }
}

fn describe_error(b: &ErrorBody) -> String {
    match b.record {
        Some(r) => format!("it reported {} at record {r}: {}", b.code, b.message),
        None => format!("it reported {}: {}", b.code, b.message),
    }
}
