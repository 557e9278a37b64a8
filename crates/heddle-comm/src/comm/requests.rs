//! Non-blocking point-to-point messages ([`Communicator::isend`], [`Communicator::irecv`])
//! and the [`Request`]s that finish them, receives from any source or with any tag, and
//! probes. Requests move whenever the engine runs: in their own `wait`/`test`, and in any
//! other call of the same worker (a blocking receive also pushes an earlier `isend`).

use std::sync::Arc;

use heddle_wire::{Codec, Dtype};

use super::{Communicator, Shared};
use crate::engine::{wait_unlocked, Awaited, Finished, Label, Matched, Memory, Need, Pattern};
use crate::{Element, Error, Result};

/// Where a received (or probed) message came from and what it holds (MPI's `Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank in the communicator.
    pub source: usize,
    /// The message's tag.
    pub tag: u32,
    /// Its length in bytes.
    pub bytes: usize,
    /// The element type it was sent as (`None`: untyped bytes).
    pub dtype: Option<Dtype>,
}

/// A non-blocking send or receive under way (MPI's `Request`), holding the buffer `B` it
/// reads or fills until it has finished.
///
/// Wait for it with [`Request::wait`] (again: the same status at once), poll it with
/// [`Request::test`], or take the buffer back with [`Request::into_buffer`]. Dropping an
/// unfinished request lets it go on without its owner: a send continues from a copy, a
/// receive is dropped (or its message discarded if it had started to arrive).
#[derive(Debug)]
pub struct Request<B = ()> {
    handle: Handle,
    buf: B,
}

#[derive(Debug)]
struct Handle {
    shared: Arc<Shared>,
    members: Arc<[usize]>,
    id: u64,
    /// `Some` once finished: the status (`None` for a send or a cancelled receive).
    done: Option<Option<Status>>,
    data: Option<Vec<u8>>,
    cancelled: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.done.is_none() {
            self.shared.lock().detach(self.id);
        }
    }
}

impl Handle {
    fn finish(&mut self, f: Finished) {
        let members = &self.members;
        self.done = Some(f.matched.map(|m| status(members, m)));
        self.data = f.data;
    }
}

fn status(members: &[usize], m: Matched) -> Status {
    Status {
        source: members.iter().position(|&w| w == m.peer).unwrap_or(m.peer),
        tag: m.tag,
        bytes: m.len as usize,
        dtype: match m.codec {
            Codec::Array(d) => Some(d),
            _ => None,
        },
    }
}

impl<B> Request<B> {
    /// Blocks until the operation has finished; returns the received message's status
    /// (`None` for a send or a cancelled receive).
    ///
    /// # Errors
    /// [`Error::Timeout`] naming the ranks and tags awaited when nothing moved for the
    /// communicator's timeout; [`Error::Truncated`] or [`Error::TypeMismatch`] for a
    /// message that does not fit; [`Error::PeerLost`] or [`Error::Aborted`].
    pub fn wait(&mut self) -> Result<Option<Status>> {
        if let Some(s) = self.handle.done {
            return Ok(s);
        }
        let h = &mut self.handle;
        let id = h.id;
        let f =
            wait_unlocked(&h.shared, Awaited::Requests(&[id], Need::All), |e| e.take_finished(id))?;
        h.finish(f);
        Ok(h.done.flatten())
    }

    /// Moves the links once; returns whether the operation has finished.
    ///
    /// # Errors
    /// As [`Request::wait`], except that it never times out.
    pub fn test(&mut self) -> Result<bool> {
        if self.handle.done.is_some() {
            return Ok(true);
        }
        let h = &mut self.handle;
        let f = h.shared.lock().test_request(h.id)?;
        if let Some(f) = f {
            h.finish(f);
        }
        Ok(h.done.is_some())
    }

    /// Whether it has finished, without moving the links (cheaper than
    /// [`Request::test`]: the links move in any other call of the worker).
    pub fn is_done(&mut self) -> bool {
        if self.handle.done.is_some() {
            return true;
        }
        let h = &mut self.handle;
        let f = h.shared.lock().take_finished(h.id);
        if let Some(f) = f {
            h.finish(f);
        }
        h.done.is_some()
    }

    /// The received message's status once finished.
    pub fn status(&self) -> Option<Status> {
        self.handle.done.flatten()
    }

    /// Cancels a receive that no message has started to match; returns whether it was
    /// cancelled (it then counts as finished, with no status). Sends are not cancelled.
    pub fn cancel(&mut self) -> bool {
        if self.handle.done.is_some() {
            return false;
        }
        let h = &mut self.handle;
        let mut engine = h.shared.lock();
        if !engine.cancel_request(h.id) {
            return false;
        }
        let f = engine.take_finished(h.id);
        drop(engine);
        if let Some(f) = f {
            h.finish(f);
        }
        h.cancelled = true;
        true
    }

    /// Whether [`Request::cancel`] cancelled it.
    pub fn is_cancelled(&self) -> bool {
        self.handle.cancelled
    }

    /// Waits, then returns the buffer (with the received message in it).
    ///
    /// # Errors
    /// As [`Request::wait`].
    pub fn into_buffer(mut self) -> Result<B> {
        self.wait()?;
        let Request { handle: _, buf } = self;
        Ok(buf)
    }

    /// The bytes of a finished [`Communicator::irecv_bytes`] (once).
    pub fn take_bytes(&mut self) -> Option<Vec<u8>> {
        self.handle.data.take()
    }

    /// Waits for every request of `reqs` (all of one world); returns their statuses.
    ///
    /// # Errors
    /// As [`Request::wait`]; [`Error::InvalidArgument`] for requests of different worlds.
    pub fn wait_all(reqs: &mut [&mut Request<B>]) -> Result<Vec<Option<Status>>> {
        Self::wait_set(reqs, Need::All)?;
        reqs.iter_mut().map(|r| r.wait()).collect()
    }

    /// Waits until one of `reqs` has finished; returns its index and status, or `None`
    /// when every request had already finished before (MPI's `UNDEFINED`).
    ///
    /// # Errors
    /// As [`Request::wait_all`].
    pub fn wait_any(reqs: &mut [&mut Request<B>]) -> Result<Option<(usize, Option<Status>)>> {
        // Active: not yet seen finished by a wait or test of the caller's.
        let active: Vec<usize> =
            (0..reqs.len()).filter(|&i| reqs[i].handle.done.is_none()).collect();
        if active.is_empty() {
            return Ok(None);
        }
        Self::wait_set(reqs, Need::Any)?;
        for i in active {
            if reqs[i].test()? {
                return Ok(Some((i, reqs[i].status())));
            }
        }
        Err(lost())
    }

    fn wait_set(reqs: &mut [&mut Request<B>], need: Need) -> Result<()> {
        let open: Vec<&Handle> =
            reqs.iter().map(|r| &r.handle).filter(|h| h.done.is_none()).collect();
        let Some(first) = open.first() else { return Ok(()) };
        if open.iter().any(|h| !Arc::ptr_eq(&h.shared, &first.shared)) {
            return Err(Error::InvalidArgument(
                "requests of different worlds cannot be waited for together".into(),
            ));
        }
        let ids: Vec<u64> = open.iter().map(|h| h.id).collect();
        let shared = first.shared.clone();
        wait_unlocked(&shared, Awaited::Requests(&ids, need), |e| {
            e.finished(&ids, need).then_some(())
        })
    }
}

fn lost() -> Error {
    Error::InvalidArgument("a finished request's result was taken twice".into())
}

pub(super) fn codec_of(dtype: Option<Dtype>) -> Codec {
    dtype.map_or(Codec::Raw, Codec::Array)
}

impl Communicator {
    pub(super) fn request<B>(&self, id: u64, buf: B) -> Request<B> {
        let handle = Handle {
            shared: self.shared(),
            members: self.members.clone(),
            id,
            done: None,
            data: None,
            cancelled: false,
        };
        Request { handle, buf }
    }

    fn pattern(&self, source: Option<usize>, tag: Option<u32>) -> Result<Pattern> {
        if let Some(s) = source {
            self.check_rank(s, "source")?;
        }
        Ok(Pattern { peer: source.map(|s| self.members[s]), edge: self.ctx, tag })
    }

    /// Starts sending `data` to rank `dest` with `tag` and returns at once; the request
    /// holds `data` until the message has left.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside the communicator; a lost peer.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Request};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let (r, p) = (c.rank(), c.size());
    ///             // A ring: post both, then wait for both (no deadlock at any size).
    ///             let mut send = c.isend(vec![r as u64; 1000], (r + 1) % p, 0).unwrap();
    ///             let mut recv = c.irecv(vec![0u64; 1000], Some((r + p - 1) % p), Some(0)).unwrap();
    ///             Request::wait_all(&mut [&mut send, &mut recv]).unwrap();
    ///             assert_eq!(recv.into_buffer().unwrap()[999], ((r + p - 1) % p) as u64);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn isend<T: Element>(
        &self,
        data: Vec<T>,
        dest: usize,
        tag: u32,
    ) -> Result<Request<Vec<T>>> {
        self.send_vec(data, dest, tag, false)
    }

    /// Starts sending `data`, owned by the request (synchronous: finished on the match).
    pub(super) fn send_vec<T: Element>(
        &self,
        data: Vec<T>,
        dest: usize,
        tag: u32,
        sync: bool,
    ) -> Result<Request<Vec<T>>> {
        let bytes: &[u8] = bytemuck::cast_slice(&data);
        let mem = Memory::Borrowed { ptr: bytes.as_ptr().cast_mut(), len: bytes.len() };
        // SAFETY: the request owns `data`, whose heap memory does not move with it, and
        // detaches itself before `data` is dropped.
        let id = self.post_send(mem, Some(T::DTYPE), dest, tag, sync)?;
        Ok(self.request(id, data))
    }

    /// Starts sending `data` (untyped bytes, owned by the request) to `dest`.
    ///
    /// # Errors
    /// As [`Communicator::isend`].
    pub fn isend_bytes(&self, data: Vec<u8>, dest: usize, tag: u32) -> Result<Request> {
        let id = self.post_send(Memory::Owned(data), None, dest, tag, false)?;
        Ok(self.request(id, ()))
    }

    /// Posts a send of `mem` (synchronous: finished when a receive has matched it).
    pub(super) fn post_send(
        &self,
        mem: Memory,
        dtype: Option<Dtype>,
        dest: usize,
        tag: u32,
        sync: bool,
    ) -> Result<u64> {
        self.check_rank(dest, "destination")?;
        let label = Label { sync, ..Label::p2p(codec_of(dtype)) };
        self.lock().post_send(self.members[dest], self.ctx, tag, label, mem)
    }

    /// Starts receiving into `buf` a message from `source` (`None`: any rank) with `tag`
    /// (`None`: any tag); [`Request::status`] then says which.
    ///
    /// # Errors
    /// As [`Communicator::isend`]; [`Error::Truncated`] or [`Error::TypeMismatch`] for an
    /// early message that does not fit.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 1 {
    ///                 c.send(&[7i32, 8], 0, 42).unwrap();
    ///             } else {
    ///                 let mut r = c.irecv(vec![0i32; 4], None, None).unwrap(); // any source, any tag
    ///                 let st = r.wait().unwrap().unwrap();
    ///                 assert_eq!((st.source, st.tag, st.bytes), (1, 42, 8));
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn irecv<T: Element>(
        &self,
        mut buf: Vec<T>,
        source: Option<usize>,
        tag: Option<u32>,
    ) -> Result<Request<Vec<T>>> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf);
        let mem = Memory::Borrowed { ptr: bytes.as_mut_ptr(), len: bytes.len() };
        // SAFETY: as in `isend`; nothing else reads `buf` until the request is done.
        let id =
            self.lock().post_recv(self.pattern(source, tag)?, codec_of(Some(T::DTYPE)), mem)?;
        Ok(self.request(id, buf))
    }

    /// Starts receiving a message of any length as bytes ([`Request::take_bytes`]).
    ///
    /// # Errors
    /// As [`Communicator::irecv`].
    pub fn irecv_bytes(&self, source: Option<usize>, tag: Option<u32>) -> Result<Request> {
        let pattern = self.pattern(source, tag)?;
        let id = self.lock().post_recv(pattern, Codec::Raw, Memory::Grow(Vec::new()))?;
        Ok(self.request(id, ()))
    }

    /// Starts sending `len` bytes at `ptr` (elements of `dtype`) to `dest`.
    ///
    /// # Safety
    /// The memory must stay valid and unchanged until the request has finished or has
    /// been dropped.
    ///
    /// # Errors
    /// As [`Communicator::isend`].
    pub unsafe fn isend_raw(
        &self,
        ptr: *const u8,
        len: usize,
        dtype: Option<Dtype>,
        dest: usize,
        tag: u32,
    ) -> Result<Request> {
        let mem = Memory::Borrowed { ptr: ptr.cast_mut(), len };
        let id = self.post_send(mem, dtype, dest, tag, false)?;
        Ok(self.request(id, ()))
    }

    /// Starts receiving into `len` bytes at `ptr` (elements of `dtype`, `None`: any).
    ///
    /// # Safety
    /// The memory must stay valid, writable and untouched until the request has finished
    /// or has been dropped.
    ///
    /// # Errors
    /// As [`Communicator::irecv`].
    pub unsafe fn irecv_raw(
        &self,
        ptr: *mut u8,
        len: usize,
        dtype: Option<Dtype>,
        source: Option<usize>,
        tag: Option<u32>,
    ) -> Result<Request> {
        let pattern = self.pattern(source, tag)?;
        let id = self.lock().post_recv(pattern, codec_of(dtype), Memory::Borrowed { ptr, len })?;
        Ok(self.request(id, ()))
    }

    /// Receives into `buf` a message from `source` (`None`: any rank) with `tag` (`None`:
    /// any tag); returns where it came from.
    ///
    /// # Errors
    /// As [`Request::wait`].
    pub fn recv_any<T: Element>(
        &self,
        buf: &mut [T],
        source: Option<usize>,
        tag: Option<u32>,
    ) -> Result<Status> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        // SAFETY: `buf` outlives the request, which is finished or dropped below.
        let mut r = unsafe {
            self.irecv_raw(bytes.as_mut_ptr(), bytes.len(), Some(T::DTYPE), source, tag)?
        };
        Ok(r.wait()?.expect("a receive that was not cancelled has a status"))
    }

    /// Waits until a message from `source` (`None`: any) with `tag` (`None`: any) can be
    /// received and says where it came from and how long it is, without receiving it.
    ///
    /// # Errors
    /// As [`Request::wait`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 c.send(&[1.0f64; 5], 1, 3).unwrap();
    ///             } else {
    ///                 let st = c.probe(None, None).unwrap();
    ///                 let mut buf = vec![0.0f64; st.bytes / 8]; // sized from the probe
    ///                 c.recv(&mut buf, st.source, st.tag).unwrap();
    ///                 assert_eq!(buf, [1.0; 5]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn probe(&self, source: Option<usize>, tag: Option<u32>) -> Result<Status> {
        let p = self.pattern(source, tag)?;
        let m = wait_unlocked(&self.shared, Awaited::Probe(&p), |e| e.probe(&p))?;
        Ok(status(&self.members, m))
    }

    /// As [`Communicator::probe`], but only looks (once): `None` if nothing matches yet.
    ///
    /// # Errors
    /// As [`Communicator::probe`], except that it never times out.
    pub fn iprobe(&self, source: Option<usize>, tag: Option<u32>) -> Result<Option<Status>> {
        let p = self.pattern(source, tag)?;
        let mut engine = self.lock();
        engine.pass()?;
        Ok(engine.probe(&p).map(|m| status(&self.members, m)))
    }
}
