//! The start of a bridge (`spec/bridge.md` §4.1): the first channel, the filter's
//! INITIALIZE checked (version first, then the token), and the host's answer.

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::sync::PoisonError;
use std::time::Instant;

use crate::control::{ErrorBody, FilterMsg, HostMsg, PROTOCOL_VERSION};
use crate::framing::{FrameReader, FrameWriter, Incoming, TAG_RESULTS};
use crate::host::Bridge;
use crate::reader::{Frames, Reader};
use crate::transport::{read_first_message, Channel, Endpoint};
use crate::{Error, Result, Transport};

impl Bridge {
    /// Makes the first channel, reads the filter's INITIALIZE (version first, then the
    /// token) and answers with the host's. A TCP peer without the token is dropped and the
    /// host keeps listening until the start timeout.
    pub(crate) fn handshake(&self, mut endpoint: Endpoint, pipe: Channel) -> Result<Reader> {
        let deadline = Instant::now() + self.cfg.start_timeout;
        let limit = self.cfg.start_timeout;
        let mut w = self.writer();
        let mut pipe = Some(pipe);
        let (reader, write) = loop {
            let channel = match endpoint.transport() {
                Transport::Pipe => {
                    pipe.take().ok_or_else(|| Error::Config("pipe used twice".into()))?
                }
                _ => endpoint.accept(deadline, limit, self.pid(), &mut || self.check_alive())?,
            };
            let (frames, msg) = self.first_message(channel.read, channel.read_fd, deadline)?;
            let reader = Reader { frames, probe: channel.probe };
            endpoint.handshake_done();
            let mut fw =
                FrameWriter::new(channel.write, self.cfg.bridge_id, self.cfg.frame_payload);
            match msg {
                FilterMsg::Initialize { version, .. } if version != PROTOCOL_VERSION => {
                    let e = Error::Version { host: PROTOCOL_VERSION, filter: version };
                    let _ = send_error(&mut fw, "VERSION", &e.to_string());
                    return Err(e);
                }
                FilterMsg::Initialize { token, .. } if self.token_ok(&token) => break (reader, fw),
                _ if endpoint.transport() == Transport::Tcp => continue,
                FilterMsg::Initialize { .. } => {
                    let _ = send_error(&mut fw, "AUTH", "wrong bridge token");
                    return Err(Error::protocol("§3", "the filter presented a wrong token"));
                }
                other => {
                    return Err(Error::protocol(
                        "§4.1",
                        format!("the filter's first message is {other:?}, not INITIALIZE"),
                    ))
                }
            }
        };
        w.fw = write;
        w.parked_pipe = pipe;
        w.endpoint = Some(endpoint);
        let init = HostMsg::Initialize {
            version: PROTOCOL_VERSION,
            bridge: self.cfg.bridge_id,
            task: self.cfg.task.clone(),
            instance: self.cfg.instance,
            parallelism: self.cfg.parallelism,
            args: self.cfg.args.clone(),
            max_record: self.cfg.max_record,
            frame_payload: self.cfg.frame_payload,
            credits: self.cfg.credits,
        };
        w.fw.control(&init.to_json())?;
        w.fw.flush()?;
        Ok(reader)
    }

    /// Reads the first control message of a new channel, waiting at most until `deadline`.
    pub(crate) fn first_message(
        &self,
        read: Box<dyn Read + Send>,
        fd: RawFd,
        deadline: Instant,
    ) -> Result<(Frames, FilterMsg)> {
        if fd < 0 {
            // Shared memory: the reader itself waits, until the deadline the endpoint set
            // or the filter's exit; nothing is read ahead of the first message.
            let mut reader = FrameReader::new(read, "filter", TAG_RESULTS, 0, self.cfg.max_record);
            let msg = match reader.read_message() {
                Ok(Some(Incoming::Control(json))) => FilterMsg::from_json(&json)?,
                Ok(Some(other)) => {
                    return Err(Error::protocol("§4.1", format!("the filter began with {other:?}")))
                }
                Ok(None) => {
                    return Err(Error::protocol("§4.1", "the filter exited before INITIALIZE"))
                }
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::TimedOut => {
                    return Err(Error::Timeout {
                        what: "first frame from the filter".into(),
                        limit: self.cfg.start_timeout,
                    })
                }
                Err(e) => return Err(e),
            };
            return Ok((reader, msg));
        }
        let first =
            read_first_message(fd, deadline, self.cfg.start_timeout, 64 << 10, &mut || {
                self.check_alive()
            })?;
        let msg = match FrameReader::new(&first[..], "filter", TAG_RESULTS, 0, self.cfg.max_record)
            .read_message()?
        {
            Some(Incoming::Control(json)) => FilterMsg::from_json(&json)?,
            Some(other) => {
                return Err(Error::protocol("§4.1", format!("the filter began with {other:?}")))
            }
            None => {
                return Err(Error::protocol(
                    "§4.1",
                    "the filter closed its channel before INITIALIZE",
                ))
            }
        };
        Ok((FrameReader::new(read, "filter", TAG_RESULTS, 0, self.cfg.max_record), msg))
    }

    pub(crate) fn token_ok(&self, token: &str) -> bool {
        let (a, b) = (token.as_bytes(), self.token.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    fn check_alive(&self) -> Result<()> {
        let mut p = self.process.lock().unwrap_or_else(PoisonError::into_inner);
        match p.try_status() {
            None => Ok(()),
            Some(_) => Err(Error::protocol("§7", "the filter exited before connecting")),
        }
    }
}

fn send_error(
    fw: &mut FrameWriter<Box<dyn Write + Send>>,
    code: &str,
    message: &str,
) -> Result<()> {
    let body = ErrorBody { code: code.into(), message: message.into(), record: None };
    fw.control(&HostMsg::Error(body).to_json())?;
    fw.flush()
}
