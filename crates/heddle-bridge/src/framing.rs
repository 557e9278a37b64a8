//! Frames on a channel (`spec/bridge.md` §2): writing records, credits and control
//! messages with fragmentation, and reading them back reassembled and checked.

use std::io::{BufReader, BufWriter, Read, Write};

use heddle_wire::{Codec, Flags, Header, Kind, Limits, HEADER_LEN};

use crate::{Error, Record, Result};

/// `tag` of DATA records (host → filter).
pub const TAG_DATA: u32 = 0;
/// `tag` of RESULTS records (filter → host).
pub const TAG_RESULTS: u32 = 1;

/// What a reader delivers: a whole record, a credit grant, or a control message's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A record with its number (already checked to be the next one, B2).
    Record(u64, Record),
    /// Records granted.
    Credit(u32),
    /// A control message's JSON text.
    Control(Vec<u8>),
}

/// Writes bridge frames to one channel, buffered: call [`FrameWriter::flush`] before
/// waiting for the peer.
#[derive(Debug)]
pub struct FrameWriter<W: Write> {
    out: BufWriter<W>,
    bridge: u32,
    frame_payload: usize,
}

impl<W: Write> FrameWriter<W> {
    /// A writer for bridge `bridge` fragmenting payloads above `frame_payload` bytes.
    pub fn new(out: W, bridge: u32, frame_payload: u32) -> Self {
        FrameWriter {
            out: BufWriter::with_capacity(64 << 10, out),
            bridge,
            frame_payload: frame_payload.max(1) as usize,
        }
    }

    /// Sets the bridge id (after the handshake).
    pub fn set_bridge(&mut self, bridge: u32, frame_payload: u32) {
        self.bridge = bridge;
        self.frame_payload = frame_payload.max(1) as usize;
    }

    fn message(
        &mut self,
        kind: Kind,
        codec: Codec,
        tag: u32,
        seq: u64,
        key: &[u8],
        payload: &[u8],
    ) -> Result<()> {
        let n = payload.len().div_ceil(self.frame_payload).max(1);
        for i in 0..n {
            let chunk = &payload[(i * self.frame_payload).min(payload.len())
                ..((i + 1) * self.frame_payload).min(payload.len())];
            let k = if i == 0 { key } else { &[][..] };
            let mut h = Header::new(kind).with_edge(self.bridge).with_tag(tag).with_sequence(seq);
            h.codec = codec;
            h.flags = Flags::for_fragment(i as u64, (n - 1) as u64);
            h.key_len = u16::try_from(k.len())
                .map_err(|_| Error::Config(format!("record key of {} bytes", k.len())))?;
            h.msg_len = payload.len() as u64;
            h.frag_len = chunk.len() as u32;
            let w = |e| Error::io("writing to the bridge channel", e);
            self.out.write_all(&h.to_bytes()).map_err(w)?;
            self.out.write_all(k).map_err(w)?;
            self.out.write_all(chunk).map_err(w)?;
        }
        Ok(())
    }

    /// Writes record number `seq` in the direction `tag` says.
    ///
    /// # Errors
    /// [`Error::Io`] from the channel; [`Error::Config`] for a key above 65 535 bytes.
    pub fn record(&mut self, tag: u32, seq: u64, r: &Record) -> Result<()> {
        if r.codec == Codec::Pickle {
            return Err(Error::protocol("B5", "pickled records cannot cross a bridge"));
        }
        self.message(Kind::Data, r.codec, tag, seq, &r.key, &r.payload)
    }

    /// Writes a control message given as its JSON text.
    ///
    /// # Errors
    /// [`Error::Io`] from the channel.
    pub fn control(&mut self, json: &[u8]) -> Result<()> {
        self.message(Kind::BridgeControl, Codec::Json, 0, 0, &[], json)
    }

    /// Grants `n` records.
    ///
    /// # Errors
    /// [`Error::Io`] from the channel.
    pub fn credit(&mut self, n: u32) -> Result<()> {
        self.message(Kind::Credit, Codec::Raw, 0, 0, &[], &n.to_le_bytes())
    }

    /// Sends everything buffered.
    ///
    /// # Errors
    /// [`Error::Io`] from the channel.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io("writing to the bridge channel", e))
    }

    /// The channel, after a flush.
    ///
    /// # Errors
    /// [`Error::Io`] if the flush fails.
    pub fn into_inner(self) -> Result<W> {
        self.out
            .into_inner()
            .map_err(|e| Error::io("writing to the bridge channel", e.into_error()))
    }
}

/// Reads bridge frames from one channel, reassembling messages and checking the record
/// numbers (B2), the direction's tag, the codec (B5) and `max_record` (B3).
#[derive(Debug)]
pub struct FrameReader<R: Read> {
    input: BufReader<R>,
    peer: &'static str,
    expect_tag: u32,
    next_seq: u64,
    max_record: u64,
    limits: Limits,
}

impl<R: Read> FrameReader<R> {
    /// A reader of frames sent by `peer` (`"host"` or `"filter"`), whose records carry
    /// `expect_tag`, the first numbered `next_seq`.
    pub fn new(
        input: R,
        peer: &'static str,
        expect_tag: u32,
        next_seq: u64,
        max_record: u64,
    ) -> Self {
        FrameReader {
            input: BufReader::with_capacity(64 << 10, input),
            peer,
            expect_tag,
            next_seq,
            max_record,
            limits: Limits::default(),
        }
    }

    /// The number the next record must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Continues the numbering of a previous channel (§6).
    pub fn set_next_seq(&mut self, next_seq: u64) {
        self.next_seq = next_seq;
    }

    /// Sets the record size limit (after the handshake).
    pub fn set_max_record(&mut self, max_record: u64) {
        self.max_record = max_record;
    }

    /// Whether bytes are already buffered (a writer need not flush before reading them).
    pub fn has_buffered(&self) -> bool {
        !self.input.buffer().is_empty()
    }

    /// The channel.
    pub fn into_inner(self) -> R {
        self.input.into_inner()
    }

    fn header(&mut self) -> Result<Option<Header>> {
        let mut hb = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match self.input.read(&mut hb[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => {
                    return Err(Error::protocol(
                        "§7",
                        format!("the {} closed the channel inside a frame", self.peer),
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("reading the bridge channel", e)),
            }
        }
        Header::decode(&hb, &self.limits)
            .map(Some)
            .map_err(|source| Error::Wire { peer: self.peer, source })
    }

    fn exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.input.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::protocol(
                    "§7",
                    format!("the {} closed the channel inside a frame", self.peer),
                )
            } else {
                Error::io("reading the bridge channel", e)
            }
        })
    }

    /// The next message, or `None` when the peer closed the channel between frames.
    ///
    /// # Errors
    /// [`Error::Wire`], [`Error::Protocol`] or [`Error::RecordTooLarge`] for bad input;
    /// [`Error::Io`] from the channel.
    pub fn read_message(&mut self) -> Result<Option<Incoming>> {
        let Some(first) = self.header()? else { return Ok(None) };
        if !first.flags.is_first() {
            return Err(Error::protocol("wire R1", "a middle or last fragment opens a message"));
        }
        match first.kind {
            Kind::Data | Kind::Credit | Kind::BridgeControl => {}
            k => {
                return Err(Error::protocol(
                    "§2",
                    format!("a frame of kind {k:?} from the {}; bridges carry data, credit and bridge control", self.peer),
                ))
            }
        }
        if first.kind == Kind::Data {
            if first.tag != self.expect_tag {
                return Err(Error::protocol(
                    "§2",
                    format!(
                        "a record with tag {} from the {} (expected {})",
                        first.tag, self.peer, self.expect_tag
                    ),
                ));
            }
            if first.codec == Codec::Pickle {
                return Err(Error::protocol(
                    "B5",
                    format!("record {} from the {} is a pickle", first.sequence, self.peer),
                ));
            }
            if first.sequence != self.next_seq {
                return Err(Error::protocol(
                    "B2",
                    format!("record {} from the {} where record {} was due (lost, repeated or reordered)", first.sequence, self.peer, self.next_seq),
                ));
            }
        }
        if first.msg_len > self.max_record {
            return Err(Error::RecordTooLarge {
                record: first.sequence,
                size: first.msg_len,
                limit: self.max_record,
            });
        }
        let mut key = vec![0u8; first.key_len as usize];
        self.exact(&mut key)?;
        let mut payload = vec![0u8; first.frag_len as usize];
        self.exact(&mut payload)?;
        let mut last = first.flags.is_last();
        while !last {
            let h = self.header()?.ok_or_else(|| {
                Error::protocol(
                    "§7",
                    format!("the {} closed the channel inside a message", self.peer),
                )
            })?;
            if h.flags.is_first()
                || h.kind != first.kind
                || h.sequence != first.sequence
                || h.msg_len != first.msg_len
                || h.key_len != 0
            {
                return Err(Error::protocol(
                    "wire R2",
                    "a fragment that does not continue the open message",
                ));
            }
            let at = payload.len();
            payload.resize(at + h.frag_len as usize, 0);
            self.exact(&mut payload[at..])?;
            last = h.flags.is_last();
        }
        if payload.len() as u64 != first.msg_len {
            return Err(Error::protocol(
                "wire R5",
                format!("a message of {} bytes declared {}", payload.len(), first.msg_len),
            ));
        }
        Ok(Some(match first.kind {
            Kind::Data => {
                let seq = first.sequence;
                self.next_seq += 1;
                Incoming::Record(seq, Record { codec: first.codec, key, payload })
            }
            Kind::Credit => {
                let n: [u8; 4] = payload.as_slice().try_into().map_err(|_| {
                    Error::protocol("wire K4", format!("a credit of {} bytes", payload.len()))
                })?;
                Incoming::Credit(u32::from_le_bytes(n))
            }
            _ => Incoming::Control(payload),
        }))
    }
}
