//! Synchronous sends (MPI's `Ssend`/`Issend`): they finish only once a receive on the
//! destination has matched the message (spec/wire.md A1), not when the data has left.
//! Termination detection such as NBX (`Issend`, `Iprobe`, `Ibarrier`) relies on this.

use super::{Communicator, Request};
use crate::engine::{wait_unlocked, Awaited, Memory, Need};
use crate::{Element, Result};

impl Communicator {
    /// Starts a synchronous send of `data` to rank `dest` with `tag`: the request finishes
    /// once a receive on `dest` has matched the message (MPI's `Issend`).
    ///
    /// # Errors
    /// As [`Communicator::isend`]; waiting times out, naming the send, if `dest` never
    /// posts a matching receive.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 let mut req = c.issend(vec![1u32, 2, 3], 1, 5).unwrap();
    ///                 // Rank 1 has not received yet: the send cannot have finished.
    ///                 assert!(!req.test().unwrap());
    ///                 c.send(&[0u8], 1, 6).unwrap(); // "go ahead"
    ///                 req.wait().unwrap();
    ///             } else {
    ///                 c.recv(&mut [0u8], 0, 6).unwrap();
    ///                 let mut buf = [0u32; 3];
    ///                 c.recv(&mut buf, 0, 5).unwrap();
    ///                 assert_eq!(buf, [1, 2, 3]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn issend<T: Element>(
        &self,
        data: Vec<T>,
        dest: usize,
        tag: u32,
    ) -> Result<Request<Vec<T>>> {
        self.send_vec(data, dest, tag, true)
    }

    /// Starts a synchronous send of untyped bytes (owned by the request).
    ///
    /// # Errors
    /// As [`Communicator::issend`].
    pub fn issend_bytes(&self, data: Vec<u8>, dest: usize, tag: u32) -> Result<Request> {
        let id = self.post_send(Memory::Owned(data), None, dest, tag, true)?;
        Ok(self.request(id, ()))
    }

    /// Starts a synchronous send of `len` bytes at `ptr` (elements of `dtype`).
    ///
    /// # Safety
    /// As [`Communicator::isend_raw`].
    ///
    /// # Errors
    /// As [`Communicator::issend`].
    pub unsafe fn issend_raw(
        &self,
        ptr: *const u8,
        len: usize,
        dtype: Option<heddle_wire::Dtype>,
        dest: usize,
        tag: u32,
    ) -> Result<Request> {
        let mem = Memory::Borrowed { ptr: ptr.cast_mut(), len };
        let id = self.post_send(mem, dtype, dest, tag, true)?;
        Ok(self.request(id, ()))
    }

    /// Sends `data` to rank `dest` with `tag` and returns once a receive there has matched
    /// it (MPI's `Ssend`).
    ///
    /// # Errors
    /// As [`Communicator::send`]; [`crate::Error::Timeout`] naming the synchronous send
    /// when `dest` posts no matching receive for the timeout.
    pub fn ssend<T: Element>(&self, data: &[T], dest: usize, tag: u32) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let mem = Memory::Borrowed { ptr: bytes.as_ptr().cast_mut(), len: bytes.len() };
        let id = self.post_send(mem, Some(T::DTYPE), dest, tag, true)?;
        let shared = self.shared();
        let done = wait_unlocked(&shared, Awaited::Requests(&[id], Need::All), |e| {
            e.take_finished(id).map(|_| ())
        });
        if done.is_err() {
            // `data` is borrowed only for this call: the engine goes on from a copy.
            shared.lock().detach(id);
        }
        done
    }
}
