//! Operations on data sets of `(key, value)` pairs: keyed reductions, grouping, joins,
//! sorting, and `distinct`.

use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use heddle_task::{Compute, Context, Edge, Record};
use rustc_hash::FxHasher;

use crate::dataset::{same_session, DataSet};
use crate::sort_task::ExternalSort;
use crate::tasks::{CombineTask, Identity, JoinKind, JoinTask, Side};
use crate::Result;

/// The partition of `key` among `p`: a hash that every worker computes alike.
pub(crate) fn key_partition<K: Hash>(key: &K, p: usize) -> usize {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    (h.finish() % p as u64) as usize
}

impl<K: Record + Hash + Eq + Ord, V: Record> DataSet<(K, V)> {
    /// Values combined per key with `f` (associative, commutative): combined within each
    /// partition first, then across them.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let pairs = s.from_vec(vec![('a', 1), ('b', 2), ('a', 3)]);
    /// let sums = pairs.reduce_by_key(|x, y| x + y).sort_by_key()?;
    /// assert_eq!(sums.collect()?, Some(vec![('a', 4), ('b', 2)]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reduce_by_key(&self, f: impl Fn(V, V) -> V + Send + Sync + 'static) -> DataSet<(K, V)> {
        let f = Arc::new(f);
        let g = f.clone();
        let fold: Arc<dyn Fn(V, V) -> V + Send + Sync> = Arc::new(move |a, b| g(a, b));
        let first: Arc<dyn Fn(V) -> V + Send + Sync> = Arc::new(|v| v);
        let combined = self.then("combine", Edge::direct, move |_| CombineTask {
            first: first.clone(),
            fold: fold.clone(),
            table: Default::default(),
        });
        combined.then(
            "reduce_by_key",
            move || {
                let f = f.clone();
                Edge::keyed_reduce(move |a, b| f(a, b))
            },
            |_| Identity(PhantomData),
        )
    }

    /// Values folded per key into an accumulator: `seq` adds a value (starting from
    /// `zero()`), `comb` merges two accumulators (associative, commutative).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let pairs = s.from_vec(vec![('a', 1u32), ('b', 2), ('a', 3)]);
    /// // (count, total) per key
    /// let stats = pairs.aggregate_by_key(
    ///     || (0u32, 0u32),
    ///     |(n, total), v| (n + 1, total + v),
    ///     |x, y| (x.0 + y.0, x.1 + y.1),
    /// );
    /// assert_eq!(stats.sort_by_key()?.collect()?, Some(vec![('a', (2, 4)), ('b', (1, 2))]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn aggregate_by_key<A: Record>(
        &self,
        zero: impl Fn() -> A + Send + Sync + 'static,
        seq: impl Fn(A, V) -> A + Send + Sync + 'static,
        comb: impl Fn(A, A) -> A + Send + Sync + 'static,
    ) -> DataSet<(K, A)> {
        let seq = Arc::new(seq);
        let s2 = seq.clone();
        let first: Arc<dyn Fn(V) -> A + Send + Sync> = Arc::new(move |v| s2(zero(), v));
        let fold: Arc<dyn Fn(A, V) -> A + Send + Sync> = Arc::new(move |a, v| seq(a, v));
        let combined = self.then("combine", Edge::direct, move |_| CombineTask {
            first: first.clone(),
            fold: fold.clone(),
            table: Default::default(),
        });
        let comb = Arc::new(comb);
        combined.then(
            "aggregate_by_key",
            move || {
                let c = comb.clone();
                Edge::keyed_reduce(move |a, b| c(a, b))
            },
            |_| Identity(PhantomData),
        )
    }

    /// Every key once with all its values.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let pairs = s.from_vec(vec![(1u8, 'x'), (2, 'y'), (1, 'z')]);
    /// let groups = pairs.group_by_key().map(|(k, mut vs)| {
    ///     vs.sort();
    ///     (k, vs)
    /// });
    /// let want = vec![(1, vec!['x', 'z']), (2, vec!['y'])];
    /// assert_eq!(groups.sort_by_key()?.collect()?, Some(want));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group_by_key(&self) -> DataSet<(K, Vec<V>)> {
        self.then("group_by_key", Edge::keyed_gather, |_| Identity(PhantomData))
    }

    fn join_with<W: Record>(
        &self,
        other: &DataSet<(K, W)>,
        kind: JoinKind,
        name: &str,
    ) -> Result<DataSet<(K, (Option<V>, Option<W>))>> {
        same_session(self, other)?;
        let left = self.map(|(k, v)| (k, Side::<V, W>::Left(v)));
        let right = other.map(|(k, w)| (k, Side::<V, W>::Right(w)));
        Ok(DataSet::new(&self.session, name, move |b, vname| {
            let (l, r) = (left.vertex(b)?, right.vertex(b)?);
            let p = left.parallelism();
            let v = b.graph.compute(vname, p, move |_| JoinTask::<K, V, W> {
                kind,
                table: Default::default(),
            });
            let by_key = move |x: &(K, Side<V, W>)| key_partition(&x.0, p as usize);
            b.graph.connect(&l, &v, Edge::partition(by_key));
            b.graph.connect(&r, &v, Edge::partition(by_key));
            Ok(v.output())
        }))
    }

    /// Inner join: `(key, (v, w))` for every pair of values with equal keys.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let ages = s.from_vec(vec![(1u32, 30u8), (2, 40)]);
    /// let initials = s.from_vec(vec![(1u32, 'a'), (3, 'c')]);
    /// assert_eq!(ages.join(&initials)?.collect()?, Some(vec![(1, (30, 'a'))]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// Data sets of different sessions.
    pub fn join<W: Record>(&self, other: &DataSet<(K, W)>) -> Result<DataSet<(K, (V, W))>> {
        Ok(self
            .join_with(other, JoinKind::Inner, "join")?
            .flat_map(|(k, (v, w))| v.zip(w).map(|vw| (k, vw))))
    }

    /// Left outer join: every left pair, with `None` where no right value has its key.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let ages = s.from_vec(vec![(1u32, 30u8), (2, 40)]);
    /// let initials = s.from_vec(vec![(1u32, 'a'), (3, 'c')]);
    /// let joined = ages.left_join(&initials)?.sort_by_key()?;
    /// assert_eq!(joined.collect()?, Some(vec![(1, (30, Some('a'))), (2, (40, None))]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// Data sets of different sessions.
    pub fn left_join<W: Record>(
        &self,
        other: &DataSet<(K, W)>,
    ) -> Result<DataSet<(K, (V, Option<W>))>> {
        Ok(self
            .join_with(other, JoinKind::Left, "left_join")?
            .flat_map(|(k, (v, w))| v.map(|v| (k, (v, w)))))
    }

    /// Full outer join: matched pairs, and unmatched values of either side with `None`.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let ages = s.from_vec(vec![(1u32, 30u8), (2, 40)]);
    /// let initials = s.from_vec(vec![(1u32, 'a'), (3, 'c')]);
    /// let joined = ages.full_outer_join(&initials)?.sort_by_key()?;
    /// let want = vec![(1, (Some(30), Some('a'))), (2, (Some(40), None)), (3, (None, Some('c')))];
    /// assert_eq!(joined.collect()?, Some(want));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// Data sets of different sessions.
    pub fn full_outer_join<W: Record>(
        &self,
        other: &DataSet<(K, W)>,
    ) -> Result<DataSet<(K, (Option<V>, Option<W>))>> {
        self.join_with(other, JoinKind::FullOuter, "full_outer_join")
    }

    /// Sorted by key across partitions: partition i holds keys no greater than partition
    /// i + 1's, each sorted (equal keys in arrival order). Samples the keys now (an action
    /// over the input, as Spark's `sortByKey` does) to pick the ranges and estimate the
    /// records' size; each partition then holds its records up to the session's spill
    /// budget ([`crate::Session::with_options`]) and writes sorted runs to disk beyond it,
    /// merged at the end.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(2)?;
    /// let pairs = s.from_vec(vec![(3u32, 'c'), (1, 'a'), (4, 'd'), (2, 'b')]);
    /// let sorted = pairs.sort_by_key()?; // sorted within and across partitions
    /// assert_eq!(sorted.collect()?, Some(vec![(1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As any action.
    pub fn sort_by_key(&self) -> Result<DataSet<(K, V)>>
    where
        K: Sync,
    {
        let p = self.parallelism() as usize;
        let samples = self
            .then("sample_keys", Edge::direct, |i| SampleTask::new(u64::from(i)))
            .collect_all()?;
        let records: u64 = samples.iter().map(|s| s.1).sum();
        let bytes: u64 = samples.iter().map(|s| s.2).sum();
        let mut keys: Vec<K> = samples.into_iter().flat_map(|s| s.0).collect();
        keys.sort();
        let splitters: Vec<K> =
            (1..p).filter_map(|i| keys.get(i * keys.len() / p).cloned()).collect();
        // Records held decoded per partition before a run spills. A held record takes its
        // heap data (about its encoded size) plus its slot in the vector of held records,
        // counted twice: the vector grows by doubling, and the stable sort needs scratch.
        let encoded = bytes.checked_div(records).map_or(1, |b| b.max(1));
        let per_record = encoded + 2 * std::mem::size_of::<(K, V)>() as u64;
        let max_held =
            (self.session.0.opts.spill.budget_bytes as u64 / per_record).max(1024) as usize;
        let dirs = self.session.0.opts.spill.dirs.clone();
        let splitters = Arc::new(splitters);
        Ok(self.then(
            "sort_by_key",
            move || {
                let s = splitters.clone();
                Edge::partition(move |x: &(K, V)| s.partition_point(|k| *k <= x.0))
            },
            move |_| ExternalSort::new(max_held, dirs.clone()),
        ))
    }
}

/// Keys sampled per partition to pick the ranges of a sort.
const SAMPLE: usize = 1024;
/// Every this many records, one is encoded to estimate the partition's size.
const SIZE_EVERY: u64 = 64;

/// A uniform sample of [`SAMPLE`] keys of its partition (reservoir sampling, seeded by
/// the partition so every run picks the same keys), with the partition's record count
/// and an estimate of its encoded bytes; emitted as one record at the end.
struct SampleTask<K, V> {
    kept: Vec<K>,
    seen: u64,
    sized: (u64, u64),
    rng: u64,
    _v: PhantomData<fn(V)>,
}

impl<K, V> SampleTask<K, V> {
    fn new(seed: u64) -> Self {
        SampleTask {
            kept: Vec::with_capacity(SAMPLE),
            seen: 0,
            sized: (0, 0),
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            _v: PhantomData,
        }
    }

    fn next_random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

impl<K: Record, V: Record> Compute for SampleTask<K, V> {
    type In = (K, V);
    type Out = (Vec<K>, u64, u64);

    fn execute(
        &mut self,
        _: &mut Context<'_, (Vec<K>, u64, u64)>,
        x: (K, V),
    ) -> heddle_task::Result<()> {
        if self.seen.is_multiple_of(SIZE_EVERY) {
            self.sized.0 += 1;
            self.sized.1 += bincode::serialized_size(&x).unwrap_or(0);
        }
        self.seen += 1;
        let k = x.0;
        if self.kept.len() < SAMPLE {
            self.kept.push(k);
        } else {
            let j = self.next_random() % self.seen;
            if (j as usize) < SAMPLE {
                self.kept[j as usize] = k;
            }
        }
        Ok(())
    }

    fn end_of_input(
        &mut self,
        ctx: &mut Context<'_, (Vec<K>, u64, u64)>,
    ) -> heddle_task::Result<()> {
        let bytes = (self.sized.1 * self.seen).checked_div(self.sized.0).unwrap_or(0);
        ctx.emit((std::mem::take(&mut self.kept), self.seen, bytes));
        Ok(())
    }
}

impl<T: Record + Hash + Eq + Ord> DataSet<T> {
    /// Every distinct record once.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let mut once = s.from_vec(vec![3u32, 1, 3, 2, 1]).distinct().collect()?.unwrap();
    /// once.sort();
    /// assert_eq!(once, vec![1, 2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn distinct(&self) -> DataSet<T> {
        self.map(|x| (x, ())).reduce_by_key(|a, _| a).map(|(x, ())| x)
    }
}
