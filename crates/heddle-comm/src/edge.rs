//! The channel API that dataflow operations are built on: one dataflow edge's channels on
//! this worker. Open an edge, send messages to workers under the edge's credit, take the
//! messages that arrived, wait while nothing moves, close (on drop).
//!
//! Every (edge, sending worker, receiving worker) stream has a byte window: a send that
//! the receiver has not granted room for is handed back, so a slow consumer slows its
//! producers and memory stays bounded. Nothing here knows what the messages hold.
//!
//! ```
//! use heddle_comm::{local_world, CommConfig, Envelope, Kind};
//! let comms = local_world(2, CommConfig::default()).unwrap();
//! std::thread::scope(|s| {
//!     for c in &comms {
//!         s.spawn(move || {
//!             let mut edge = c.open_edge(7, 1 << 20).unwrap();
//!             let link = edge.link();
//!             let source = c.rank() as u32;
//!             let env = Envelope { kind: Kind::Data, source, target: 0, sequence: 0 };
//!             if c.rank() == 1 {
//!                 link.lock().try_send(0, env, b"hello".to_vec()).unwrap();
//!             }
//!             loop {
//!                 let mut io = link.lock();
//!                 let moved = io.poll().unwrap();
//!                 if c.rank() == 1 && !io.sending() {
//!                     break; // sent and acknowledged
//!                 }
//!                 if let Some(m) = io.recv() {
//!                     assert_eq!((m.from, m.payload.as_slice()), (1, &b"hello"[..]));
//!                     break;
//!                 }
//!                 drop(io);
//!                 if moved {
//!                     edge.moved()
//!                 } else {
//!                     edge.wait(&[0, 1], &|| "a hello".into()).unwrap()
//!                 }
//!             }
//!         });
//!     }
//! });
//! ```

use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use crate::channels::{Delivered, Envelope, DATAFLOW_EDGE};
use crate::comm::Shared;
use crate::engine::{Engine, Idle};
use crate::{Communicator, Error, Result};

/// One dataflow edge's channels on this worker; closed when dropped.
#[derive(Debug)]
pub struct EdgeChannels {
    link: EdgeLink,
    idle: Idle,
    timeout: Duration,
}

/// A handle on an open edge's channels (cheap to clone; valid while the edge is open).
#[derive(Debug, Clone)]
pub struct EdgeLink {
    shared: Arc<Shared>,
    edge: u32,
}

/// An edge's channels with this worker's engine held: a batch of sends and receives.
#[derive(Debug)]
pub struct EdgeIo<'a> {
    engine: MutexGuard<'a, Engine>,
    edge: u32,
}

impl Communicator {
    /// Opens dataflow edge `edge` (an id below 2^30, the same on every worker) on this
    /// worker, receiving at most `window` bytes in flight from each sending worker.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an id out of range or an edge already open.
    pub fn open_edge(&self, edge: u32, window: u64) -> Result<EdgeChannels> {
        if edge >= DATAFLOW_EDGE {
            return Err(Error::InvalidArgument(format!("edge id {edge} must be below 2^30")));
        }
        let shared = self.shared();
        let edge = edge | DATAFLOW_EDGE;
        shared.lock().channels.open(edge, window.max(1))?;
        let timeout = shared.config.timeout;
        Ok(EdgeChannels { link: EdgeLink { shared, edge }, idle: Idle::default(), timeout })
    }
}

impl EdgeChannels {
    /// A handle to send and receive through.
    pub fn link(&self) -> EdgeLink {
        self.link.clone()
    }

    /// Holds this worker's engine for a batch of sends and receives (as
    /// [`EdgeLink::lock`], without a handle of its own).
    pub fn lock(&self) -> EdgeIo<'_> {
        self.link.lock()
    }

    /// The number of workers (world ranks) messages may go to.
    pub fn workers(&self) -> usize {
        self.link.shared.lock().peers()
    }

    /// Gives up waiting after `timeout` with nothing moving (default: the communicator's).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Waits (spin, yield, then short sleeps) after a pass that moved nothing.
    ///
    /// # Errors
    /// [`Error::Aborted`] if the job was aborted, [`Error::PeerLost`] if one of `peers`
    /// (world ranks the caller still needs) is gone, [`Error::Timeout`] (its detail from
    /// `what`) if nothing moved for the timeout.
    pub fn wait(&mut self, peers: &[usize], what: &dyn Fn() -> String) -> Result<()> {
        self.link.shared.lock().idle(
            &mut self.idle,
            peers,
            self.timeout,
            "dataflow operation",
            what,
        )
    }

    /// Resets the wait after a pass that moved something.
    pub fn moved(&mut self) {
        self.idle = Idle::default();
    }

    /// Bytes held in the edge's receive buffers now, and the most so far.
    pub fn buffered(&self) -> (u64, u64) {
        self.link.shared.lock().channels.buffered(self.link.edge)
    }
}

impl Drop for EdgeChannels {
    fn drop(&mut self) {
        self.link.shared.lock().channels.close(self.link.edge);
    }
}

impl EdgeLink {
    /// Holds this worker's engine for a batch of sends and receives.
    pub fn lock(&self) -> EdgeIo<'_> {
        EdgeIo { engine: self.shared.lock(), edge: self.edge }
    }
}

impl EdgeIo<'_> {
    /// Queues `data` for `worker` (world rank) if the edge's credit allows; otherwise
    /// hands it back (try again after [`EdgeIo::poll`]).
    ///
    /// # Errors
    /// `Err(data)`: no credit now.
    pub fn try_send(
        &mut self,
        worker: usize,
        env: Envelope,
        data: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        self.engine.channels.try_send(worker, self.edge, env, data)
    }

    /// One pass over every link: sends what credit allows, takes what arrived. Returns
    /// whether anything moved.
    ///
    /// # Errors
    /// A lost peer or a malformed frame.
    pub fn poll(&mut self) -> Result<bool> {
        self.engine.poll_channels()
    }

    /// The oldest complete message that arrived on this edge.
    pub fn recv(&mut self) -> Option<Delivered> {
        self.engine.channels.recv(self.edge)
    }

    /// Whether messages or credit grants of this edge still wait to leave this worker.
    pub fn sending(&self) -> bool {
        self.engine.channels.sending(self.edge)
    }
}
