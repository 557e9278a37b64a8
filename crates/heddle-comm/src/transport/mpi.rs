//! MPI point-to-point as a transport (`--features mpi`, `HEDDLE_TRANSPORT=mpi`): under
//! `mpirun` (or `srun` with PMI) every link of the job is an MPI channel, so Heddle's
//! collectives and dataflow run on whatever fabric the MPI library drives — InfiniBand,
//! Omni-Path, Slingshot — where no TCP or shared-memory path is as fast.
//!
//! Each frame is one MPI message (header and payload) on a private duplicate of
//! `MPI_COMM_WORLD`, so the program's own MPI messages never meet Heddle's. Flow control is
//! the TCP link's: a sender spends a credit per data frame and the receiver grants them
//! back, so a receiver never holds more than a window of unconsumed frames from one peer
//! (MPI's eager protocol would otherwise buffer without bound). Frames are received with
//! matched probes (`MPI_Improbe`/`MPI_Mrecv`), safe with several threads.

use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::OnceLock;

use heddle_wire::{FrameRef, Header, Kind, Limits, HEADER_LEN};
use mpi::ffi;

use super::{Link, Polled};
use crate::{Error, Result};

/// The tag of every Heddle message.
const TAG: c_int = 0x4844;

fn check(what: &str, code: c_int) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::Config(format!("MPI: {what} failed with error code {code}")))
    }
}

/// Heddle's view of the MPI job: its rank and size, and the private communicator.
#[derive(Debug, Clone, Copy)]
pub struct MpiWorld {
    comm: Comm,
    /// This process's rank in `MPI_COMM_WORLD`.
    pub rank: usize,
    /// The number of processes in `MPI_COMM_WORLD`.
    pub size: usize,
}

/// A communicator handle that may move between threads: MPI is initialized with
/// `MPI_THREAD_MULTIPLE`, so any thread may call it.
#[derive(Debug, Clone, Copy)]
struct Comm(ffi::MPI_Comm);

// SAFETY: see `Comm`: MPI runs with MPI_THREAD_MULTIPLE (checked in `MpiWorld::init`).
unsafe impl Send for Comm {}
// SAFETY: as above.
unsafe impl Sync for Comm {}

static WORLD: OnceLock<std::result::Result<MpiWorld, String>> = OnceLock::new();

extern "C" fn finalize_at_exit() {
    let mut done: c_int = 0;
    // SAFETY: plain MPI calls at process exit, after `MPI_Init_thread` succeeded.
    unsafe {
        ffi::MPI_Finalized(&mut done);
        if done == 0 {
            ffi::MPI_Finalize();
        }
    }
}

impl MpiWorld {
    /// Initializes MPI once per process (with `MPI_THREAD_MULTIPLE`; `MPI_Finalize` runs at
    /// exit) and returns the job; later calls return the same.
    ///
    /// # Errors
    /// [`Error::Config`] if MPI cannot start or cannot give full thread support.
    pub fn init() -> Result<MpiWorld> {
        WORLD
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .clone()
            .map_err(Error::Config)
    }

    fn start() -> Result<MpiWorld> {
        let (mut initialized, mut provided) = (0, 0);
        // SAFETY: MPI calls with valid out-pointers; initialization happens once (OnceLock).
        unsafe {
            check("MPI_Initialized", ffi::MPI_Initialized(&mut initialized))?;
            if initialized == 0 {
                let required = ffi::RSMPI_THREAD_MULTIPLE;
                let code = ffi::MPI_Init_thread(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    required,
                    &mut provided,
                );
                check("MPI_Init_thread", code)?;
                libc::atexit(finalize_at_exit);
            } else {
                check("MPI_Query_thread", ffi::MPI_Query_thread(&mut provided))?;
            }
            if provided < ffi::RSMPI_THREAD_MULTIPLE {
                return Err(Error::Config(format!(
                    "MPI gives thread level {provided}, not MPI_THREAD_MULTIPLE: use an MPI \
                     library built with thread support (Debian's Open MPI is)"
                )));
            }
            let mut comm: ffi::MPI_Comm = ffi::RSMPI_COMM_NULL;
            check("MPI_Comm_dup", ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm))?;
            let (mut rank, mut size) = (0, 0);
            check("MPI_Comm_rank", ffi::MPI_Comm_rank(comm, &mut rank))?;
            check("MPI_Comm_size", ffi::MPI_Comm_size(comm, &mut size))?;
            Ok(MpiWorld { comm: Comm(comm), rank: rank as usize, size: size as usize })
        }
    }

    /// Every rank's `mine` (at most 255 bytes each), in rank order: how ranks learn which
    /// host each runs on.
    ///
    /// # Errors
    /// [`Error::Config`] if `mine` is too long or MPI fails.
    pub fn allgather_names(&self, mine: &str) -> Result<Vec<String>> {
        const SLOT: usize = 256;
        if mine.len() >= SLOT {
            return Err(Error::Config(format!("host name {mine:?} is longer than 255 bytes")));
        }
        let mut send = vec![0u8; SLOT];
        send[..mine.len()].copy_from_slice(mine.as_bytes());
        let mut all = vec![0u8; SLOT * self.size];
        // SAFETY: buffers of the sizes declared to MPI, alive across the blocking call.
        let code = unsafe {
            ffi::MPI_Allgather(
                send.as_ptr().cast(),
                SLOT as c_int,
                ffi::RSMPI_UINT8_T,
                all.as_mut_ptr().cast(),
                SLOT as c_int,
                ffi::RSMPI_UINT8_T,
                self.comm.0,
            )
        };
        check("MPI_Allgather", code)?;
        Ok(all
            .chunks(SLOT)
            .map(|c| {
                let end = c.iter().position(|&b| b == 0).unwrap_or(SLOT);
                String::from_utf8_lossy(&c[..end]).into_owned()
            })
            .collect())
    }

    /// Ends every process of the MPI job (a failed worker takes the job down, as
    /// `mpirun` users expect).
    pub fn abort(&self, code: i32) {
        // SAFETY: a plain MPI call; it does not return on success.
        unsafe {
            ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code);
        }
    }
}

/// A send under way: its bytes must stay put until MPI is done with them.
struct Sending {
    _bytes: Vec<u8>,
    request: ffi::MPI_Request,
}

/// The link to one peer over MPI.
pub(crate) struct MpiLink {
    comm: Comm,
    peer: usize,
    limits: Limits,
    window: usize,
    credits: usize,
    consumed_ungranted: usize,
    sends: VecDeque<Sending>,
    /// A received frame the handler refused: offered again first.
    held: Option<Vec<u8>>,
}

// SAFETY: the request handles belong to this link alone, and MPI runs with
// MPI_THREAD_MULTIPLE.
unsafe impl Send for MpiLink {}

impl std::fmt::Debug for MpiLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiLink")
            .field("peer", &self.peer)
            .field("credits", &self.credits)
            .field("sends", &self.sends.len())
            .finish_non_exhaustive()
    }
}

impl MpiLink {
    /// The link to `peer` of `world`.
    pub(crate) fn new(world: &MpiWorld, peer: usize, buffer_bytes: usize, window: usize) -> Self {
        MpiLink {
            comm: world.comm,
            peer,
            limits: super::link_limits(buffer_bytes),
            window,
            credits: window,
            consumed_ungranted: 0,
            sends: VecDeque::new(),
            held: None,
        }
    }

    fn lost(&self, what: &str, code: c_int) -> Error {
        Error::PeerLost { rank: self.peer, detail: format!("MPI {what} failed with code {code}") }
    }

    /// Forgets the sends MPI has finished, oldest first.
    fn reap(&mut self) -> Result<()> {
        while let Some(s) = self.sends.front_mut() {
            let mut done: c_int = 0;
            // SAFETY: a live request of this link; MPI_Test frees it once complete.
            let code =
                unsafe { ffi::MPI_Test(&mut s.request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            if code != 0 {
                return Err(self.lost("MPI_Test", code));
            }
            if done == 0 {
                break;
            }
            self.sends.pop_front();
        }
        Ok(())
    }

    fn isend(&mut self, bytes: Vec<u8>) -> Result<()> {
        // SAFETY: reading a constant the MPI shim defines.
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the buffer is kept in `sends` (its heap block does not move) until
        // MPI_Test reports the send complete.
        let code = unsafe {
            ffi::MPI_Isend(
                bytes.as_ptr().cast(),
                bytes.len() as c_int,
                ffi::RSMPI_UINT8_T,
                self.peer as c_int,
                TAG,
                self.comm.0,
                &mut request,
            )
        };
        if code != 0 {
            return Err(self.lost("MPI_Isend", code));
        }
        self.sends.push_back(Sending { _bytes: bytes, request });
        Ok(())
    }

    /// The next frame from the peer, if one has arrived.
    fn receive(&mut self) -> Result<Option<Vec<u8>>> {
        if let Some(held) = self.held.take() {
            return Ok(Some(held));
        }
        let mut found: c_int = 0;
        // SAFETY: reading a constant the MPI shim defines.
        let mut message = unsafe { ffi::RSMPI_MESSAGE_NULL };
        // SAFETY: MPI_Status is plain data MPI fills in.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers; a matched message is received below, exactly once.
        let code = unsafe {
            ffi::MPI_Improbe(
                self.peer as c_int,
                TAG,
                self.comm.0,
                &mut found,
                &mut message,
                &mut status,
            )
        };
        if code != 0 {
            return Err(self.lost("MPI_Improbe", code));
        }
        if found == 0 {
            return Ok(None);
        }
        let mut count: c_int = 0;
        // SAFETY: the status MPI_Improbe filled in.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        let mut buf = vec![0u8; count.max(0) as usize];
        // SAFETY: the buffer holds `count` bytes; the message handle is consumed once.
        let code = unsafe {
            ffi::MPI_Mrecv(
                buf.as_mut_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                &mut message,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        if code != 0 {
            return Err(self.lost("MPI_Mrecv", code));
        }
        Ok(Some(buf))
    }

    fn grant(&mut self) -> Result<()> {
        let frame = super::grant_frame(std::mem::take(&mut self.consumed_ungranted));
        self.isend(frame.encode_to_vec())
    }
}

impl Link for MpiLink {
    fn try_send(&mut self, header: &Header, payload: &[u8]) -> Result<bool> {
        let needs_credit = header.kind != Kind::Credit;
        if needs_credit && self.credits == 0 {
            self.reap()?;
            return Ok(false);
        }
        let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
        bytes.extend_from_slice(&header.to_bytes());
        bytes.extend_from_slice(payload);
        self.isend(bytes)?;
        if needs_credit {
            self.credits -= 1;
        }
        self.reap()?;
        Ok(true)
    }

    fn poll(&mut self, f: &mut dyn FnMut(&Header, &[u8]) -> Result<bool>) -> Result<Polled> {
        loop {
            let Some(buf) = self.receive()? else { return Ok(Polled::Empty) };
            let (frame, _) = FrameRef::decode(&buf, &self.limits)
                .map_err(|source| Error::Wire { rank: self.peer, source })?;
            let kind = frame.header.kind;
            if kind == Kind::Credit && frame.header.edge == 0 {
                self.credits += super::granted(frame.payload, self.peer)?;
                continue;
            }
            if !f(&frame.header, frame.payload)? {
                self.held = Some(buf);
                return Ok(Polled::Refused);
            }
            if kind != Kind::Credit {
                self.consumed_ungranted += 1;
                if self.consumed_ungranted * 2 >= self.window {
                    self.grant()?;
                }
            }
            return Ok(Polled::Consumed);
        }
    }

    fn check_alive(&mut self, _rank: usize) -> Result<()> {
        // A dead process ends the whole MPI job; nothing to watch here.
        self.reap()
    }

    fn flushed(&mut self) -> bool {
        self.reap().is_ok() && self.sends.is_empty()
    }

    fn transport(&self) -> &'static str {
        "mpi"
    }
}
