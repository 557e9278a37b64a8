//! Derived datatypes (MPI's `MPI_Type_contiguous`, `MPI_Type_vector`,
//! `MPI_Type_indexed`): which elements of a buffer of `T` a message carries, and in which
//! order. A contiguous type sends the caller's memory as it is; any other is packed into a
//! contiguous copy on the way out and unpacked on the way in.

use std::fmt;
use std::marker::PhantomData;

use heddle_wire::Dtype;

use crate::{Communicator, Element, Error, Result};

/// A layout of elements of `T` in a buffer: blocks of consecutive elements at offsets
/// (in elements), carried in the order given, spanning [`Datatype::extent`] elements.
///
/// ```
/// use heddle_comm::Datatype;
/// // Column 1 of a 3 × 4 row-major matrix: 3 blocks of 1, 4 apart.
/// let column = Datatype::<f64>::vector(3, 1, 4).unwrap();
/// let m: Vec<f64> = (0..12).map(f64::from).collect();
/// assert_eq!(column.pack(&m[1..]).unwrap(), [1.0, 5.0, 9.0]);
/// assert_eq!((column.size(), column.extent()), (3, 9));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Datatype<T: Element> {
    /// (offset, length) of each block, in elements.
    blocks: Vec<(usize, usize)>,
    extent: usize,
    _element: PhantomData<T>,
}

impl<T: Element> fmt::Debug for Datatype<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Datatype")
            .field("element", &T::DTYPE)
            .field("blocks", &self.blocks)
            .field("extent", &self.extent)
            .finish()
    }
}

impl<T: Element> Datatype<T> {
    fn of(blocks: Vec<(usize, usize)>) -> Result<Datatype<T>> {
        let mut spans: Vec<(usize, usize)> = blocks.iter().copied().filter(|b| b.1 > 0).collect();
        spans.sort_unstable();
        if let Some(w) = spans.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(Error::InvalidArgument(format!(
                "a datatype's blocks overlap: elements {}..{} and {}..{}; a receive could not \
                 tell which to write",
                w[0].0,
                w[0].0 + w[0].1,
                w[1].0,
                w[1].0 + w[1].1
            )));
        }
        let extent = blocks.iter().map(|&(o, l)| o + l).max().unwrap_or(0);
        Ok(Datatype { blocks, extent, _element: PhantomData })
    }

    /// `count` consecutive elements (`MPI_Type_contiguous`).
    ///
    /// ```
    /// let t = heddle_comm::Datatype::<u8>::contiguous(4);
    /// assert!(t.is_contiguous() && t.size() == 4);
    /// ```
    pub fn contiguous(count: usize) -> Datatype<T> {
        let blocks = if count == 0 { Vec::new() } else { vec![(0, count)] };
        Datatype { blocks, extent: count, _element: PhantomData }
    }

    /// `count` blocks of `blocklength` elements, each starting `stride` elements after the
    /// previous (`MPI_Type_vector`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `stride < blocklength` (blocks would overlap).
    ///
    /// ```
    /// let every_other = heddle_comm::Datatype::<i32>::vector(3, 1, 2).unwrap();
    /// assert_eq!(every_other.pack(&[1, 0, 2, 0, 3]).unwrap(), [1, 2, 3]);
    /// assert!(heddle_comm::Datatype::<i32>::vector(2, 3, 2).is_err());
    /// ```
    pub fn vector(count: usize, blocklength: usize, stride: usize) -> Result<Datatype<T>> {
        if count > 1 && blocklength > 0 && stride < blocklength {
            return Err(Error::InvalidArgument(format!(
                "vector of blocks of {blocklength} elements {stride} apart: the stride must be \
                 at least the block length"
            )));
        }
        Datatype::of((0..count).map(|i| (i * stride, blocklength)).collect())
    }

    /// Blocks of `blocklengths[i]` elements at `displacements[i]`, carried in that order
    /// (`MPI_Type_indexed`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the two differ in length or blocks overlap.
    ///
    /// ```
    /// let t = heddle_comm::Datatype::<u16>::indexed(&[2, 1], &[3, 0]).unwrap();
    /// assert_eq!(t.pack(&[9, 8, 7, 6, 5]).unwrap(), [6, 5, 9]);
    /// ```
    pub fn indexed(blocklengths: &[usize], displacements: &[usize]) -> Result<Datatype<T>> {
        if blocklengths.len() != displacements.len() {
            return Err(Error::InvalidArgument(format!(
                "indexed datatype with {} block lengths but {} displacements",
                blocklengths.len(),
                displacements.len()
            )));
        }
        Datatype::of(displacements.iter().copied().zip(blocklengths.iter().copied()).collect())
    }

    /// `count` copies of this type, each [`Datatype::extent`] elements after the previous
    /// (a count of a derived type in an MPI call).
    ///
    /// ```
    /// let pair_of_three = heddle_comm::Datatype::<u8>::vector(2, 1, 3).unwrap();
    /// let t = pair_of_three.repeat(2);
    /// assert_eq!(t.pack(&[1, 0, 0, 2, 3, 0, 0, 4]).unwrap(), [1, 2, 3, 4]);
    /// ```
    pub fn repeat(&self, count: usize) -> Datatype<T> {
        let blocks = (0..count)
            .flat_map(|k| self.blocks.iter().map(move |&(o, l)| (o + k * self.extent, l)))
            .collect();
        Datatype { blocks, extent: self.extent * count, _element: PhantomData }
    }

    /// The elements a message of this type carries.
    pub fn size(&self) -> usize {
        self.blocks.iter().map(|b| b.1).sum()
    }

    /// The elements of a buffer it spans, from the first to past the last it touches.
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// The element type on the wire.
    pub fn element(&self) -> Dtype {
        T::DTYPE
    }

    /// Whether it carries a buffer's first [`Datatype::size`] elements as they lie (sent
    /// without a copy).
    pub fn is_contiguous(&self) -> bool {
        self.size() == self.extent
            && self
                .blocks
                .iter()
                .scan(0, |at, &(o, l)| Some(std::mem::replace(at, o + l) == o))
                .all(|x| x)
    }

    fn check_len(&self, len: usize, what: &str) -> Result<()> {
        if len >= self.extent {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the {what} buffer holds {len} elements but the datatype spans {}",
            self.extent
        )))
    }

    /// The elements of `buf` it carries, in order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `buf` is shorter than [`Datatype::extent`].
    pub fn pack(&self, buf: &[T]) -> Result<Vec<T>> {
        self.check_len(buf.len(), "send")?;
        let mut out = Vec::with_capacity(self.size());
        for &(o, l) in &self.blocks {
            out.extend_from_slice(&buf[o..o + l]);
        }
        Ok(out)
    }

    /// Writes `packed` (as [`Datatype::pack`] made it) into the elements of `buf` it
    /// carries; the others are left as they were.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `buf` is shorter than [`Datatype::extent`] or
    /// `packed` does not hold [`Datatype::size`] elements.
    pub fn unpack(&self, packed: &[T], buf: &mut [T]) -> Result<()> {
        self.check_len(buf.len(), "receive")?;
        if packed.len() != self.size() {
            return Err(Error::InvalidArgument(format!(
                "{} packed elements for a datatype of {}",
                packed.len(),
                self.size()
            )));
        }
        let mut at = 0;
        for &(o, l) in &self.blocks {
            buf[o..o + l].copy_from_slice(&packed[at..at + l]);
            at += l;
        }
        Ok(())
    }
}

impl Communicator {
    /// Sends the elements of `buf` that `datatype` carries to rank `dest` with `tag`
    /// (`MPI_Send` with a derived type): as they lie when contiguous, else packed.
    ///
    /// # Errors
    /// As [`Communicator::send`]; [`Error::InvalidArgument`] when `buf` is shorter than the
    /// type's extent.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Datatype};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let column = Datatype::<f32>::vector(2, 1, 3).unwrap(); // a column of a 2 × 3 matrix
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let column = &column;
    ///         s.spawn(move || {
    ///             if c.rank() == 0 {
    ///                 let m = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    ///                 c.send_typed(&m[2..], column, 1, 0).unwrap(); // column 2
    ///             } else {
    ///                 let mut m = [0.0f32; 6];
    ///                 c.recv_typed(&mut m, column, 0, 0).unwrap(); // into column 0
    ///                 assert_eq!(m, [3.0, 0.0, 0.0, 6.0, 0.0, 0.0]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn send_typed<T: Element>(
        &self,
        buf: &[T],
        datatype: &Datatype<T>,
        dest: usize,
        tag: u32,
    ) -> Result<()> {
        datatype.check_len(buf.len(), "send")?;
        if datatype.is_contiguous() {
            return self.send(&buf[..datatype.size()], dest, tag);
        }
        self.send(&datatype.pack(buf)?, dest, tag)
    }

    /// Receives from rank `src` with `tag` into the elements of `buf` that `datatype`
    /// carries; the others are left as they were. Returns the elements received, which
    /// may be fewer than the type's size (then only the first are written).
    ///
    /// # Errors
    /// As [`Communicator::recv`] ([`Error::Truncated`] for a message longer than the
    /// type's size); [`Error::InvalidArgument`] when `buf` is shorter than its extent.
    pub fn recv_typed<T: Element>(
        &self,
        buf: &mut [T],
        datatype: &Datatype<T>,
        src: usize,
        tag: u32,
    ) -> Result<usize> {
        datatype.check_len(buf.len(), "receive")?;
        if datatype.is_contiguous() {
            return self.recv(&mut buf[..datatype.size()], src, tag);
        }
        let mut packed = vec![T::zeroed(); datatype.size()];
        let got = self.recv(&mut packed, src, tag)?;
        let mut at = 0;
        for &(o, l) in &datatype.blocks {
            let n = l.min(got - at);
            buf[o..o + n].copy_from_slice(&packed[at..at + n]);
            at += n;
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Packing then unpacking into a zeroed buffer keeps exactly the carried elements,
        /// for any vector type and any repeat count.
        #[test]
        fn unpack_undoes_pack(
            count in 0usize..6, blocklength in 0usize..4, gap in 0usize..4, repeat in 1usize..4
        ) {
            let t = Datatype::<u32>::vector(count, blocklength, blocklength + gap)
                .unwrap()
                .repeat(repeat);
            let buf: Vec<u32> = (1..=t.extent() as u32).collect();
            let packed = t.pack(&buf).unwrap();
            prop_assert_eq!(packed.len(), t.size());
            let mut back = vec![0u32; t.extent()];
            t.unpack(&packed, &mut back).unwrap();
            for (i, (&b, &orig)) in back.iter().zip(&buf).enumerate() {
                let carried = t.blocks.iter().any(|&(o, l)| (o..o + l).contains(&i));
                prop_assert_eq!(b, if carried { orig } else { 0 });
            }
            // Sent as it lies exactly when packing changes nothing.
            let as_it_lies = packed[..] == buf[..t.size()] && t.size() == t.extent();
            prop_assert_eq!(t.is_contiguous(), as_it_lies);
        }
    }

    #[test]
    fn short_buffers_and_overlaps_are_refused() {
        let t = Datatype::<u8>::vector(3, 2, 3).unwrap();
        assert_eq!(t.extent(), 8);
        let e = t.pack(&[0; 7]).unwrap_err().to_string();
        assert!(e.contains("holds 7 elements but the datatype spans 8"), "{e}");
        let e = Datatype::<u8>::indexed(&[3, 2], &[0, 2]).unwrap_err().to_string();
        assert!(e.contains("overlap: elements 0..3 and 2..4"), "{e}");
        assert!(t.unpack(&[1, 2, 3], &mut [0; 8]).is_err());
    }
}
