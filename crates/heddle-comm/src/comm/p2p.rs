//! Point-to-point messages on [`Communicator`]: typed, untyped and serialized sends and
//! receives matched by source and tag.

use heddle_wire::{Codec, Dtype};

use super::Communicator;
use crate::engine::{RecvOp, SendOp, Sink};
use crate::stamp::Signature;
use crate::{Element, Error, Result};

impl Communicator {
    pub(crate) fn check_rank(&self, r: usize, what: &str) -> Result<()> {
        if r < self.size() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "{what} rank {r} is outside this communicator of {} ranks",
                self.size()
            )))
        }
    }

    /// Sends `data` to rank `dest` with `tag`; returns once the data has left the buffer.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside the communicator; [`Error::PeerLost`],
    /// [`Error::Timeout`] or [`Error::Aborted`] if the peer is gone, nothing moved for the
    /// timeout, or the job was aborted.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 c.send(&[1.5f32, 2.5, 3.5], 1, 7).unwrap();
    ///             } else {
    ///                 let mut buf = [0.0f32; 3];
    ///                 assert_eq!(c.recv(&mut buf, 0, 7).unwrap(), 3);
    ///                 assert_eq!(buf, [1.5, 2.5, 3.5]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn send<T: Element>(&self, data: &[T], dest: usize, tag: u32) -> Result<()> {
        self.send_as(bytemuck::cast_slice(data), Some(T::DTYPE), dest, tag)
    }

    /// Sends bytes that hold elements of `dtype` (`None`: untyped): a receive into a
    /// buffer of another element type fails with [`Error::TypeMismatch`] instead of
    /// reading them as its own type.
    ///
    /// # Errors
    /// As [`Communicator::send`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Dtype};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 1 {
    ///                 let bytes = [0.25f64.to_ne_bytes(), 4.0f64.to_ne_bytes()].concat();
    ///                 c.send_as(&bytes, Some(Dtype::F64), 0, 3).unwrap();
    ///             } else {
    ///                 let mut x = [0.0f64; 2];
    ///                 c.recv(&mut x, 1, 3).unwrap(); // received as the f64s they are
    ///                 assert_eq!(x, [0.25, 4.0]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn send_as(&self, data: &[u8], dtype: Option<Dtype>, dest: usize, tag: u32) -> Result<()> {
        self.check_rank(dest, "destination")?;
        let s = [SendOp {
            peer: self.members[dest],
            edge: self.ctx,
            tag,
            data,
            codec: codec_of(dtype),
            signature: Signature::NONE,
        }];
        self.lock().exchange(&s, &mut [], "send", self.config().timeout)
    }

    /// Receives into `buf`, which holds elements of `dtype` (`None`: any); returns the
    /// bytes received.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] if the message holds another element type; as
    /// [`Communicator::recv`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Dtype};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 c.send(&[513u16], 1, 0).unwrap();
    ///             } else {
    ///                 let mut buf = [0u8; 8];
    ///                 let n = c.recv_as(&mut buf, Some(Dtype::U16), 0, 0).unwrap();
    ///                 assert_eq!((n, u16::from_ne_bytes([buf[0], buf[1]])), (2, 513));
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn recv_as(
        &self,
        buf: &mut [u8],
        dtype: Option<Dtype>,
        src: usize,
        tag: u32,
    ) -> Result<usize> {
        self.check_rank(src, "source")?;
        let mut r = [RecvOp::new(self.members[src], self.ctx, tag, Sink::Copy(buf))
            .expecting(codec_of(dtype))];
        self.lock().exchange(&[], &mut r, "recv", self.config().timeout)?;
        Ok(r[0].len as usize)
    }

    /// Receives a message from `src` with `tag` into `buf`; returns the element count.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the message is longer than `buf`; [`Error::TypeMismatch`]
    /// if it was sent as another element type; as [`Communicator::send`] otherwise.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() > 0 {
    ///                 c.send(&vec![c.rank() as i64; c.rank()], 0, 1).unwrap();
    ///             } else {
    ///                 let mut buf = [0i64; 4]; // room for the longest message
    ///                 let n = c.recv(&mut buf, 2, 1).unwrap();
    ///                 assert_eq!(&buf[..n], [2, 2]);
    ///                 assert_eq!(c.recv(&mut buf, 1, 1).unwrap(), 1);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn recv<T: Element>(&self, buf: &mut [T], src: usize, tag: u32) -> Result<usize> {
        Ok(self.recv_as(bytemuck::cast_slice_mut(buf), Some(T::DTYPE), src, tag)?
            / std::mem::size_of::<T>())
    }

    /// Sends to `dest` and receives from `src` at once (both with `tag`); returns the
    /// number of elements received. Safe against the deadlock two blocking calls risk.
    ///
    /// # Errors
    /// As [`Communicator::send`] and [`Communicator::recv`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let (r, p) = (c.rank(), c.size());
    ///             let mut got = [0u32];
    ///             // Shift one step around the ring.
    ///             c.sendrecv(&[r as u32], (r + 1) % p, &mut got, (r + p - 1) % p, 0).unwrap();
    ///             assert_eq!(got[0] as usize, (r + p - 1) % p);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn sendrecv<T: Element>(
        &self,
        data: &[T],
        dest: usize,
        buf: &mut [T],
        src: usize,
        tag: u32,
    ) -> Result<usize> {
        self.check_rank(dest, "destination")?;
        self.check_rank(src, "source")?;
        let codec = codec_of(Some(T::DTYPE));
        let s = [SendOp {
            peer: self.members[dest],
            edge: self.ctx,
            tag,
            data: bytemuck::cast_slice(data),
            codec,
            signature: Signature::NONE,
        }];
        let mut r = [RecvOp::new(
            self.members[src],
            self.ctx,
            tag,
            Sink::Copy(bytemuck::cast_slice_mut(buf)),
        )
        .expecting(codec)];
        self.lock().exchange(&s, &mut r, "sendrecv", self.config().timeout)?;
        Ok(r[0].len as usize / std::mem::size_of::<T>())
    }

    /// Sends raw bytes (untyped: any buffer may receive them).
    ///
    /// # Errors
    /// As [`Communicator::send`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 c.send_bytes(b"hello", 1, 9).unwrap();
    ///             } else {
    ///                 assert_eq!(c.recv_bytes(0, 9).unwrap(), b"hello");
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn send_bytes(&self, data: &[u8], dest: usize, tag: u32) -> Result<()> {
        self.send_as(data, None, dest, tag)
    }

    /// Receives a message of any length as bytes.
    ///
    /// # Errors
    /// As [`Communicator::send`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() > 0 {
    ///                 c.send_bytes(&vec![b'x'; 1000 * c.rank()], 0, 0).unwrap();
    ///             } else {
    ///                 let lens = [1, 2].map(|src| c.recv_bytes(src, 0).unwrap().len());
    ///                 assert_eq!(lens, [1000, 2000]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn recv_bytes(&self, src: usize, tag: u32) -> Result<Vec<u8>> {
        self.check_rank(src, "source")?;
        let mut v = Vec::new();
        let mut r = [RecvOp::new(self.members[src], self.ctx, tag, Sink::Grow(&mut v))];
        self.lock().exchange(&[], &mut r, "recv", self.config().timeout)?;
        Ok(v)
    }

    /// Sends any serializable value (bincode).
    ///
    /// # Errors
    /// [`Error::Serialization`] if `value` cannot be serialized; as [`Communicator::send`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 c.send_object(&("weights", vec![0.5f32, 1.0]), 1, 2).unwrap();
    ///             } else {
    ///                 let (name, w): (String, Vec<f32>) = c.recv_object(0, 2).unwrap();
    ///                 assert_eq!((name.as_str(), w), ("weights", vec![0.5, 1.0]));
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn send_object<S: serde::Serialize>(&self, value: &S, dest: usize, tag: u32) -> Result<()> {
        self.send_bytes(&bincode::serialize(value)?, dest, tag)
    }

    /// Receives a value sent with [`Communicator::send_object`].
    ///
    /// # Errors
    /// [`Error::Serialization`] if the bytes are not a `D`; as [`Communicator::send`].
    ///
    /// # Examples
    /// ```
    /// use std::collections::BTreeMap;
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             if c.rank() == 1 {
    ///                 c.send_object(&BTreeMap::from([(1u8, "one"), (2, "two")]), 0, 0).unwrap();
    ///             } else {
    ///                 let m: BTreeMap<u8, String> = c.recv_object(1, 0).unwrap();
    ///                 assert_eq!(m[&2], "two");
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn recv_object<D: serde::de::DeserializeOwned>(&self, src: usize, tag: u32) -> Result<D> {
        Ok(bincode::deserialize(&self.recv_bytes(src, tag)?)?)
    }
}

/// The frame codec of elements of `dtype` (`Raw` when untyped).
fn codec_of(dtype: Option<Dtype>) -> Codec {
    dtype.map_or(Codec::Raw, Codec::Array)
}
