//! `flat_map_reduce_by_key`: a flat map to `(key, value)` pairs and a `reduce_by_key`,
//! fused. Each pair goes straight into the partition's combining table, and the key is
//! looked up by reference, so a key already in the table costs no allocation — the
//! per-partition `Counter` that word counts in Spark, Dask or Ray are written with, as one
//! operation.

use std::borrow::Borrow;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use heddle_task::{Compute, Context, Edge, Record, Result};

use crate::dataset::DataSet;
use crate::tasks::Identity;

type FxTable<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
type Reducer<V> = Arc<dyn Fn(V, V) -> V + Send + Sync>;
type Emit<T, K, V> = Arc<dyn Fn(T, &mut Combiner<'_, K, V>) + Send + Sync>;

/// Where [`DataSet::flat_map_reduce_by_key`]'s function adds the pairs of a record.
pub struct Combiner<'a, K, V> {
    table: &'a mut FxTable<K, V>,
    reduce: &'a (dyn Fn(V, V) -> V + Send + Sync),
}

impl<K, V> std::fmt::Debug for Combiner<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combiner").field("keys", &self.table.len()).finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V> Combiner<'_, K, V> {
    /// Adds `value` under `key`, borrowed: the key is copied (`to_owned`) only the first
    /// time the partition sees it. `add("word", 1)` for `String` keys.
    pub fn add<Q>(&mut self, key: &Q, value: V)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.table.get_mut(key) {
            Some(slot) => fold_in(slot, value, self.reduce),
            None => {
                self.table.insert(key.to_owned(), value);
            }
        }
    }

    /// Adds `value` under an owned `key`.
    pub fn add_owned(&mut self, key: K, value: V) {
        match self.table.get_mut(&key) {
            Some(slot) => fold_in(slot, value, self.reduce),
            None => {
                self.table.insert(key, value);
            }
        }
    }
}

/// `*slot = reduce(*slot, value)` in place.
fn fold_in<V>(slot: &mut V, value: V, reduce: &(dyn Fn(V, V) -> V + Send + Sync)) {
    /// Aborts if `reduce` unwinds while the slot is moved out (it would be dropped twice).
    struct AbortOnUnwind;
    impl Drop for AbortOnUnwind {
        fn drop(&mut self) {
            std::process::abort();
        }
    }
    let guard = AbortOnUnwind;
    // SAFETY: the value read out of `slot` is written back before `slot` is used again;
    // if `reduce` panics in between, the guard aborts the process before anything can
    // observe (or drop) the moved-out slot.
    unsafe {
        let acc = std::ptr::read(slot);
        std::ptr::write(slot, reduce(acc, value));
    }
    std::mem::forget(guard);
}

/// The fused flat map and map-side combine: one table per partition, emitted at the end.
struct EmitCombineTask<T, K, V> {
    emit: Emit<T, K, V>,
    reduce: Reducer<V>,
    table: FxTable<K, V>,
}

impl<T: Send + 'static, K: Hash + Eq + Send + 'static, V: Send + 'static> Compute
    for EmitCombineTask<T, K, V>
{
    type In = T;
    type Out = (K, V);

    fn execute(&mut self, _: &mut Context<'_, (K, V)>, x: T) -> Result<()> {
        let mut c = Combiner { table: &mut self.table, reduce: &*self.reduce };
        (self.emit)(x, &mut c);
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, (K, V)>) -> Result<()> {
        for (k, v) in self.table.drain() {
            ctx.emit((k, v));
        }
        Ok(())
    }
}

impl<T: Record> DataSet<T> {
    /// `flat_map` to `(key, value)` pairs then `reduce_by_key(reduce)`, fused: `emit` adds
    /// the pairs of each record to a [`Combiner`] (by borrowed key), which combines them
    /// within the partition as they come; the partitions' tables are then reduced across
    /// workers by key. `reduce` must be associative and commutative.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let lines = s.from_vec(vec!["a b a".to_string(), "b a".to_string()]);
    /// let counts = lines.flat_map_reduce_by_key(
    ///     |line: String, c| line.split(' ').for_each(|w| c.add(w, 1u64)),
    ///     |a, b| a + b,
    /// );
    /// let want = vec![("a".to_string(), 3), ("b".to_string(), 2)];
    /// assert_eq!(counts.sort_by_key()?.collect()?, Some(want));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flat_map_reduce_by_key<K, V>(
        &self,
        emit: impl Fn(T, &mut Combiner<'_, K, V>) + Send + Sync + 'static,
        reduce: impl Fn(V, V) -> V + Send + Sync + 'static,
    ) -> DataSet<(K, V)>
    where
        K: Record + Hash + Eq + Ord,
        V: Record,
    {
        let emit: Emit<T, K, V> = Arc::new(emit);
        let reduce: Reducer<V> = Arc::new(reduce);
        let r = reduce.clone();
        let combined = self.then("flat_map_combine", Edge::direct, move |_| EmitCombineTask {
            emit: emit.clone(),
            reduce: r.clone(),
            table: FxTable::default(),
        });
        combined.then(
            "reduce_by_key",
            move || {
                let f = reduce.clone();
                Edge::keyed_reduce(move |a, b| f(a, b))
            },
            |_| Identity(PhantomData),
        )
    }
}
