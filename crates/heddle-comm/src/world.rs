//! Building a world: the links of one worker (in-process, shared memory, TCP) assembled
//! into an engine and its world communicator.

use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::comm::Shared;
use crate::engine::Engine;
use crate::transport::bcast_area::{Area, Areas};
use crate::transport::doorbell::Doorbell;
use crate::transport::shm::{RingShape, ShmSegment};
use crate::transport::{self, BoxedLink, LinkStream};
use crate::{CommConfig, Communicator, Error, JobAbort, Result};

/// Assembles the links of world rank `rank` of `size`, then builds its [`Communicator`].
/// The runtime uses this after bootstrap; tests use [`local_world`].
#[derive(Debug)]
pub struct WorldBuilder {
    rank: usize,
    links: Vec<Option<BoxedLink>>,
    config: CommConfig,
    local_workers: usize,
    /// Shared by the ranks of a world inside one process.
    abort: Option<Arc<JobAbort>>,
    attempt: u32,
    /// The host of each world rank (all one host unless told).
    hosts: Vec<u32>,
    /// The broadcast areas this worker maps: its own and its same-host peers'.
    areas: Areas,
    /// This worker's doorbell, once its peers can ring it.
    doorbell: Option<Doorbell>,
}

impl WorldBuilder {
    /// Starts a world of `size` ranks for this process's `rank`.
    ///
    /// # Errors
    /// [`Error::Config`] if the configuration is invalid or `rank >= size`.
    pub fn new(rank: usize, size: usize, config: CommConfig) -> Result<WorldBuilder> {
        config.validate()?;
        if rank >= size {
            return Err(Error::Config(format!("rank {rank} is not below the world size {size}")));
        }
        let mut links: Vec<Option<BoxedLink>> = (0..size).map(|_| None).collect();
        links[rank] = Some(transport::loopback(rank, config.window, config.buffer_bytes, None));
        Ok(WorldBuilder {
            rank,
            links,
            config,
            local_workers: size,
            abort: None,
            attempt: 0,
            hosts: vec![0; size],
            areas: Areas::none(size),
            doorbell: None,
        })
    }

    /// Records which attempt of the job this world belongs to
    /// ([`Communicator::attempt`]; 0 by default).
    pub fn set_attempt(&mut self, attempt: u32) {
        self.attempt = attempt;
    }

    /// The ring geometry every segment of this job uses.
    pub fn ring_shape(&self) -> RingShape {
        RingShape {
            world: self.links.len(),
            slots: self.config.window,
            slot_bytes: self.config.buffer_bytes,
        }
    }

    /// Creates this worker's shared-memory segment at `path` (peers on this host will
    /// write into it; unlink it once they are connected).
    ///
    /// # Errors
    /// As [`ShmSegment::create`].
    pub fn create_segment(&self, path: &Path) -> Result<ShmSegment> {
        ShmSegment::create(path, self.ring_shape())
    }

    /// Connects to same-host `peer` through its segment at `peer_path`.
    ///
    /// # Errors
    /// If the peer's segment cannot be mapped or has another geometry.
    pub fn add_shm(&mut self, peer: usize, own: &ShmSegment, peer_path: &Path) -> Result<()> {
        let shape = self.ring_shape();
        let (link, area) = transport::shm_link(own, peer_path, shape, self.rank, peer)?;
        self.links[peer] = Some(link);
        self.areas.set(peer, area);
        self.areas.set(self.rank, own.area());
        self.doorbell = Some(own.doorbell());
        Ok(())
    }

    /// Uses an authenticated TCP stream for `peer`.
    ///
    /// # Errors
    /// If socket options cannot be set.
    pub fn add_tcp(&mut self, peer: usize, stream: TcpStream) -> Result<()> {
        self.add_stream(peer, Box::new(stream))
    }

    /// Uses an authenticated byte stream over TCP for `peer`: a secure channel the runtime
    /// set up (TLS, HMAC-sealed records), or the bare socket.
    ///
    /// # Errors
    /// If socket options cannot be set.
    pub fn add_stream(&mut self, peer: usize, stream: Box<dyn LinkStream>) -> Result<()> {
        self.links[peer] =
            Some(transport::tcp_link(stream, peer, self.config.buffer_bytes, self.config.window)?);
        Ok(())
    }

    /// Uses MPI point-to-point for `peer` (the `mpi` feature).
    #[cfg(feature = "mpi")]
    pub fn add_mpi(&mut self, peer: usize, world: &transport::mpi::MpiWorld) {
        self.links[peer] = Some(Box::new(transport::mpi::MpiLink::new(
            world,
            peer,
            self.config.buffer_bytes,
            self.config.window,
        )));
    }

    /// Tells which host each world rank runs on (equal numbers: one host), for host-aware
    /// collectives; this rank's number also counts the workers sharing its host.
    ///
    /// # Errors
    /// [`Error::Config`] if `hosts` does not have one entry per rank.
    pub fn set_hosts(&mut self, hosts: Vec<u32>) -> Result<()> {
        if hosts.len() != self.links.len() {
            return Err(Error::Config(format!(
                "{} host numbers for a world of {}",
                hosts.len(),
                self.links.len()
            )));
        }
        self.local_workers = hosts.iter().filter(|&&h| h == hosts[self.rank]).count();
        self.hosts = hosts;
        Ok(())
    }

    /// Builds the world communicator.
    ///
    /// # Errors
    /// [`Error::Config`] naming the ranks without a link.
    pub fn build(self) -> Result<Communicator> {
        let missing: Vec<usize> =
            self.links.iter().enumerate().filter(|(_, l)| l.is_none()).map(|(i, _)| i).collect();
        if !missing.is_empty() {
            return Err(Error::Config(format!("no link to ranks {missing:?}")));
        }
        let size = self.links.len();
        // Sleep on the doorbell only if every peer rings it: all links rings of this host.
        let rings = self.links.iter().flatten().all(|l| matches!(l.transport(), "shm" | "local"));
        let doorbell = self.doorbell.filter(|_| rings);
        let mut links = self.links;
        if let Some(bell) = &doorbell {
            let (window, bytes) = (self.config.window, self.config.buffer_bytes);
            links[self.rank] =
                Some(transport::loopback(self.rank, window, bytes, Some(bell.clone())));
        }
        let links = links.into_iter().flatten().collect();
        let spin = self.config.spin_polls_for(self.local_workers);
        let abort = self.abort.unwrap_or_else(|| Arc::new(JobAbort::new(size)));
        if let Some(bell) = &doorbell {
            abort.ring_on_abort(bell.clone());
        }
        let engine = Engine::new(
            self.rank,
            links,
            self.config.fragment_payload(),
            self.config.window,
            spin,
            abort.clone(),
            doorbell.clone(),
        );
        let shared = Arc::new(Shared {
            engine: Mutex::new(engine),
            config: self.config,
            abort,
            attempt: self.attempt,
            hosts: self.hosts.into(),
            areas: self.areas,
            doorbell,
        });
        Ok(Communicator::world(shared, self.rank, size))
    }
}

/// A world of `size` ranks inside this process, linked by in-memory rings; hand one
/// communicator to each thread.
///
/// # Errors
/// [`Error::Config`] for an invalid configuration or `size == 0`.
pub fn local_world(size: usize, config: CommConfig) -> Result<Vec<Communicator>> {
    local_world_on_hosts(&vec![0; size], config)
}

/// [`local_world`] whose ranks behave as if rank `r` ran on host `hosts[r]`: collectives
/// pick host-aware algorithms as they would across machines (for tests of those).
///
/// ```
/// use heddle_comm::{local_world_on_hosts, CommConfig, Op};
/// let comms = local_world_on_hosts(&[0, 0, 1, 1, 2, 2], CommConfig::default()).unwrap();
/// std::thread::scope(|s| {
///     for c in &comms {
///         s.spawn(move || {
///             let mut x = [c.rank() as u64 + 1];
///             c.allreduce(&mut x, Op::Sum).unwrap();
///             assert_eq!(x[0], 21);
///         });
///     }
/// });
/// ```
///
/// # Errors
/// [`Error::Config`] for an invalid configuration or no ranks.
pub fn local_world_on_hosts(hosts: &[u32], config: CommConfig) -> Result<Vec<Communicator>> {
    let size = hosts.len();
    if size == 0 {
        return Err(Error::Config("a world needs at least one rank".into()));
    }
    let mut builders = (0..size)
        .map(|r| WorldBuilder::new(r, size, config.clone()))
        .collect::<Result<Vec<_>>>()?;
    let bells: Vec<Doorbell> = (0..size).map(|_| Doorbell::heap()).collect();
    for (b, bell) in builders.iter_mut().zip(&bells) {
        b.doorbell = Some(bell.clone());
    }
    for a in 0..size {
        for b in a + 1..size {
            let (la, lb) = transport::heap_pair(
                (a, &bells[a]),
                (b, &bells[b]),
                config.window,
                config.buffer_bytes,
            );
            builders[a].links[b] = Some(la);
            builders[b].links[a] = Some(lb);
        }
    }
    // Ranks of one (simulated) host reach each other's broadcast areas.
    let areas: Vec<Area> = (0..size).map(|_| Area::heap()).collect();
    for (r, b) in builders.iter_mut().enumerate() {
        for (q, area) in areas.iter().enumerate() {
            if hosts[q] == hosts[r] {
                b.areas.set(q, area.clone());
            }
        }
    }
    // One process, one job: a failure of any rank aborts them all.
    let abort = Arc::new(JobAbort::new(size));
    builders
        .into_iter()
        .map(|mut b| {
            b.abort = Some(abort.clone());
            b.set_hosts(hosts.to_vec())?;
            b.build()
        })
        .collect()
}

/// A world of one rank (a program started without a launcher).
///
/// # Errors
/// [`Error::Config`] for an invalid configuration.
pub fn solo(config: CommConfig) -> Result<Communicator> {
    WorldBuilder::new(0, 1, config)?.build()
}
