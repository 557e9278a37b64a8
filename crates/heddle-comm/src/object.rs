//! Collectives on serializable values (bincode): sizes travel first, then the bytes.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Communicator, Result};

fn decode<D: DeserializeOwned>(bytes: &[u8]) -> Result<D> {
    Ok(bincode::deserialize(bytes)?)
}

impl Communicator {
    /// Broadcasts `value` from `root` (other ranks pass `None`) and returns it everywhere.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] if the root passes `None`; serialization and
    /// communication errors.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let plan = (c.rank() == 2).then(|| vec!["load".to_string(), "train".into()]);
    ///             let got: Vec<String> = c.broadcast_object(plan.as_ref(), 2).unwrap();
    ///             assert_eq!(got, ["load", "train"]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn broadcast_object<T: Serialize + DeserializeOwned>(
        &self,
        value: Option<&T>,
        root: usize,
    ) -> Result<T> {
        let mut bytes = match (self.rank() == root, value) {
            (true, Some(v)) => bincode::serialize(v)?,
            (true, None) => {
                return Err(crate::Error::InvalidArgument(
                    "broadcast_object: the root must pass a value".into(),
                ))
            }
            _ => Vec::new(),
        };
        let mut len = [bytes.len() as u64];
        self.broadcast(&mut len, root)?;
        bytes.resize(len[0] as usize, 0);
        self.broadcast(&mut bytes, root)?;
        decode(&bytes)
    }

    /// Gathers every rank's value at `root` (in rank order); `None` elsewhere.
    ///
    /// # Errors
    /// Serialization and communication errors.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let names = c.gather_object(&format!("rank-{}", c.rank()), 0).unwrap();
    ///             match c.rank() {
    ///                 0 => assert_eq!(names.unwrap(), ["rank-0", "rank-1", "rank-2"]),
    ///                 _ => assert!(names.is_none()),
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn gather_object<T: Serialize + DeserializeOwned>(
        &self,
        value: &T,
        root: usize,
    ) -> Result<Option<Vec<T>>> {
        let bytes = bincode::serialize(value)?;
        let mut lens = vec![0u64; if self.rank() == root { self.size() } else { 0 }];
        self.gather(&[bytes.len() as u64], &mut lens, root)?;
        if self.rank() != root {
            // Only the root reads counts; ours must still match our buffer.
            let mut counts = vec![0; self.size()];
            counts[self.rank()] = bytes.len();
            return self.gatherv(&bytes, &mut [], &counts, root).map(|_| None);
        }
        let counts: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
        let mut all = vec![0u8; counts.iter().sum()];
        self.gatherv(&bytes, &mut all, &counts, root)?;
        split_decode(&all, &counts).map(Some)
    }

    /// Every rank receives every rank's value, in rank order.
    ///
    /// # Errors
    /// Serialization and communication errors.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mine = vec![c.rank(); c.rank()];
    ///             let all: Vec<Vec<usize>> = c.allgather_object(&mine).unwrap();
    ///             assert_eq!(all, [vec![], vec![1], vec![2, 2]]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn allgather_object<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>> {
        let bytes = bincode::serialize(value)?;
        let mut lens = vec![0u64; self.size()];
        self.allgather(&[bytes.len() as u64], &mut lens)?;
        let counts: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
        let mut all = vec![0u8; counts.iter().sum()];
        self.allgatherv(&bytes, &mut all, &counts)?;
        split_decode(&all, &counts)
    }

    /// Scatters `values` (one per rank, given at `root`; `None` elsewhere).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] if the root does not pass exactly `size()` values;
    /// serialization and communication errors.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let jobs = (c.rank() == 0)
    ///                 .then(|| vec![("a".to_string(), 1u32), ("b".into(), 2), ("c".into(), 3)]);
    ///             let (name, n): (String, u32) = c.scatter_object(jobs.as_deref(), 0).unwrap();
    ///             let r = c.rank();
    ///             assert_eq!((name.as_str(), n), (["a", "b", "c"][r], r as u32 + 1));
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scatter_object<T: Serialize + DeserializeOwned>(
        &self,
        values: Option<&[T]>,
        root: usize,
    ) -> Result<T> {
        let (lens, packed) = if self.rank() == root {
            let vs = values.filter(|v| v.len() == self.size()).ok_or_else(|| {
                crate::Error::InvalidArgument(format!(
                    "scatter_object: the root must pass {} values",
                    self.size()
                ))
            })?;
            let parts =
                vs.iter().map(bincode::serialize).collect::<std::result::Result<Vec<_>, _>>()?;
            (parts.iter().map(|p| p.len() as u64).collect::<Vec<_>>(), parts.concat())
        } else {
            (Vec::new(), Vec::new())
        };
        let mut my_len = [0u64];
        self.scatter(&lens, &mut my_len, root)?;
        let mut mine = vec![0u8; my_len[0] as usize];
        // Only the root reads counts; ours must still match our buffer.
        let mut counts: Vec<usize> = if self.rank() == root {
            lens.iter().map(|&l| l as usize).collect()
        } else {
            vec![0; self.size()]
        };
        counts[self.rank()] = mine.len();
        self.scatterv(&packed, &counts, &mut mine, root)?;
        decode(&mine)
    }

    /// Rank i's `values[j]` goes to rank j, which receives them in rank order.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] unless exactly `size()` values are given;
    /// serialization and communication errors.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let out: Vec<String> = (0..2).map(|j| format!("{}->{j}", c.rank())).collect();
    ///             let got: Vec<String> = c.alltoall_object(&out).unwrap();
    ///             let r = c.rank();
    ///             assert_eq!(got, [format!("0->{r}"), format!("1->{r}")]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn alltoall_object<T: Serialize + DeserializeOwned>(&self, values: &[T]) -> Result<Vec<T>> {
        if values.len() != self.size() {
            return Err(crate::Error::InvalidArgument(format!(
                "alltoall_object: {} values for {} ranks",
                values.len(),
                self.size()
            )));
        }
        let parts =
            values.iter().map(bincode::serialize).collect::<std::result::Result<Vec<_>, _>>()?;
        let send_lens: Vec<u64> = parts.iter().map(|p| p.len() as u64).collect();
        let mut recv_lens = vec![0u64; self.size()];
        self.alltoall(&send_lens, &mut recv_lens)?;
        let sc: Vec<usize> = send_lens.iter().map(|&l| l as usize).collect();
        let rc: Vec<usize> = recv_lens.iter().map(|&l| l as usize).collect();
        let mut all = vec![0u8; rc.iter().sum()];
        self.alltoallv(&parts.concat(), &sc, &mut all, &rc)?;
        split_decode(&all, &rc)
    }
}

fn split_decode<T: DeserializeOwned>(all: &[u8], counts: &[usize]) -> Result<Vec<T>> {
    let mut off = 0;
    counts
        .iter()
        .map(|&c| {
            let v = decode(&all[off..off + c]);
            off += c;
            v
        })
        .collect()
}
