//! The tasks data sets compile to: closures wrapped as heddle-task sources and compute
//! tasks.

use std::hash::Hash;
use std::sync::{Arc, Mutex};

use heddle_task::{Compute, Context, Produced, Result, Source};

use crate::Locked;

/// Tables of keys that stay on this worker: a fast, well-mixing hash (FxHash mixes
/// string keys too little: lookups of similar words collide).
pub(crate) type Table<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Records a source emits per call.
const PER_CALL: usize = 4096;

/// Makes partition `i` of `p`'s records (afresh for every pass).
pub(crate) type MakeIter<T> =
    Arc<dyn Fn(u32, u32) -> Box<dyn Iterator<Item = crate::Result<T>> + Send> + Send + Sync>;

/// The bytes of files partition `i` of `p` of a source reads.
pub(crate) type PartitionBytes = Arc<dyn Fn(u32, u32) -> u64 + Send + Sync>;

/// A source over an iterator per partition.
pub(crate) struct IterSource<T> {
    pub(crate) make: MakeIter<T>,
    /// For a source that reads files: how many bytes each partition reads (its progress
    /// counts bytes, as the reader reports them, instead of records).
    pub(crate) bytes: Option<PartitionBytes>,
    pub(crate) index: u32,
    pub(crate) parallelism: u32,
    pub(crate) iter: Option<Box<dyn Iterator<Item = crate::Result<T>> + Send>>,
    /// Records emitted this pass (a checkpoint's position: a restored source skips them).
    pub(crate) emitted: u64,
}

impl<T: Send + 'static> Source for IterSource<T> {
    type Out = T;

    fn next(&mut self, ctx: &mut Context<'_, T>) -> Result<Produced> {
        let (make, index, p) = (&self.make, self.index, self.parallelism);
        if self.iter.is_none() {
            self.emitted = 0;
        }
        let bytes = &self.bytes;
        let iter = self.iter.get_or_insert_with(|| {
            let iter = make(index, p);
            match bytes {
                Some(bytes) => heddle_comm::metrics::expect_bytes(bytes(index, p)),
                None => {
                    let (low, high) = iter.size_hint();
                    heddle_comm::metrics::expect_records((Some(low) == high).then_some(low as u64));
                }
            }
            iter
        });
        let before = self.emitted;
        let mut produced = Produced::More;
        for _ in 0..PER_CALL {
            match iter.next() {
                Some(Ok(x)) => {
                    self.emitted += 1;
                    ctx.emit(x);
                }
                Some(Err(e)) => return Err(e.into_task()),
                None => {
                    self.iter = None;
                    produced = Produced::Done;
                    break;
                }
            }
        }
        heddle_comm::metrics::records_done(self.emitted - before);
        Ok(produced)
    }

    fn snapshot(&mut self, _: &mut Context<'_, T>, _: u64) -> Result<Option<Vec<u8>>> {
        Ok(Some(self.emitted.to_le_bytes().to_vec()))
    }

    fn restore(&mut self, _: &mut Context<'_, T>, state: &[u8]) -> Result<()> {
        let n = state.try_into().map(u64::from_le_bytes).map_err(|_| {
            heddle_task::Error::Graph("a replayed source's checkpoint is not a count".into())
        })?;
        let mut iter = (self.make)(self.index, self.parallelism);
        for _ in 0..n {
            if let Some(Err(e)) = iter.next() {
                return Err(e.into_task());
            }
        }
        self.iter = Some(iter);
        self.emitted = n;
        Ok(())
    }
}

/// Holds its whole partition, then applies a function to all of it.
pub(crate) struct PartitionTask<T, U> {
    pub(crate) f: Arc<dyn Fn(Vec<T>) -> Vec<U> + Send + Sync>,
    pub(crate) held: Vec<T>,
}

impl<T: Send + 'static, U: Send + 'static> Compute for PartitionTask<T, U> {
    type In = T;
    type Out = U;

    fn execute(&mut self, _: &mut Context<'_, U>, x: T) -> Result<()> {
        self.held.push(x);
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, U>) -> Result<()> {
        for u in (self.f)(std::mem::take(&mut self.held)) {
            ctx.emit(u);
        }
        Ok(())
    }
}

/// Combines values by key within the partition (the map side of a keyed reduction):
/// one record per key leaves, at the end.
pub(crate) struct CombineTask<K, V, A> {
    pub(crate) first: Arc<dyn Fn(V) -> A + Send + Sync>,
    pub(crate) fold: Arc<dyn Fn(A, V) -> A + Send + Sync>,
    pub(crate) table: Table<K, Option<A>>,
}

impl<K: Hash + Eq + Send + 'static, V: Send + 'static, A: Send + 'static> Compute
    for CombineTask<K, V, A>
{
    type In = (K, V);
    type Out = (K, A);

    fn execute(&mut self, _: &mut Context<'_, (K, A)>, (k, v): (K, V)) -> Result<()> {
        // A lookup by reference first: most keys are already there (the entry API,
        // which takes the key by value, costs several times more per record).
        match self.table.get_mut(&k) {
            Some(slot) => {
                let acc = slot.take().expect("a combined value is always present between calls");
                *slot = Some((self.fold)(acc, v));
            }
            None => {
                self.table.insert(k, Some((self.first)(v)));
            }
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, (K, A)>) -> Result<()> {
        for (k, a) in self.table.drain() {
            if let Some(a) = a {
                ctx.emit((k, a));
            }
        }
        Ok(())
    }
}

/// One side of a join's input.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) enum Side<V, W> {
    Left(V),
    Right(W),
}

/// Which rows a join keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinKind {
    Inner,
    Left,
    FullOuter,
}

/// A hash join of the records of one key range: holds both sides, pairs them at the end.
pub(crate) struct JoinTask<K, V, W> {
    pub(crate) kind: JoinKind,
    pub(crate) table: Table<K, (Vec<V>, Vec<W>)>,
}

impl<
        K: Hash + Eq + Clone + Send + 'static,
        V: Clone + Send + 'static,
        W: Clone + Send + 'static,
    > Compute for JoinTask<K, V, W>
{
    type In = (K, Side<V, W>);
    type Out = (K, (Option<V>, Option<W>));

    fn execute(&mut self, _: &mut Context<'_, Self::Out>, (k, side): Self::In) -> Result<()> {
        let entry = self.table.entry(k).or_default();
        match side {
            Side::Left(v) => entry.0.push(v),
            Side::Right(w) => entry.1.push(w),
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        for (k, (vs, ws)) in self.table.drain() {
            match (vs.is_empty(), ws.is_empty()) {
                (false, false) => {
                    for v in &vs {
                        for w in &ws {
                            ctx.emit((k.clone(), (Some(v.clone()), Some(w.clone()))));
                        }
                    }
                }
                (false, true) if self.kind != JoinKind::Inner => {
                    for v in vs {
                        ctx.emit((k.clone(), (Some(v), None)));
                    }
                }
                (true, false) if self.kind == JoinKind::FullOuter => {
                    for w in ws {
                        ctx.emit((k.clone(), (None, Some(w))));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Passes records on unchanged (the receiving side of a shuffle).
pub(crate) struct Identity<T>(pub(crate) std::marker::PhantomData<fn(T)>);

impl<T: Send + 'static> Compute for Identity<T> {
    type In = T;
    type Out = T;

    fn execute(&mut self, ctx: &mut Context<'_, T>, x: T) -> Result<()> {
        ctx.emit(x);
        Ok(())
    }
}

/// Keeps what it receives (collect).
pub(crate) struct CollectTask<T>(pub(crate) Arc<Mutex<Vec<T>>>);

impl<T: Send + 'static> Compute for CollectTask<T> {
    type In = T;
    type Out = ();

    fn execute(&mut self, _: &mut Context<'_, ()>, x: T) -> Result<()> {
        self.0.locked().push(x);
        Ok(())
    }
}

/// Calls a function per record, and another at the end of the partition.
pub(crate) struct SinkTask<T> {
    pub(crate) each: Arc<dyn Fn(u32, T) -> crate::Result<()> + Send + Sync>,
    pub(crate) end: Arc<dyn Fn(u32) -> crate::Result<()> + Send + Sync>,
}

impl<T: Send + 'static> Compute for SinkTask<T> {
    type In = T;
    type Out = ();

    fn execute(&mut self, ctx: &mut Context<'_, ()>, x: T) -> Result<()> {
        (self.each)(ctx.index(), x).map_err(crate::Error::into_task)
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, ()>) -> Result<()> {
        (self.end)(ctx.index()).map_err(crate::Error::into_task)
    }
}

/// Folds its partition into one value, emitted at the end (none if `fold` never ran and
/// `emit_empty` is off).
pub(crate) struct FoldTask<T, A> {
    pub(crate) zero: Arc<dyn Fn() -> A + Send + Sync>,
    pub(crate) fold: Arc<dyn Fn(A, T) -> A + Send + Sync>,
    pub(crate) acc: Option<A>,
    pub(crate) emit_empty: bool,
}

impl<T: Send + 'static, A: Send + 'static> Compute for FoldTask<T, A> {
    type In = T;
    type Out = A;

    fn execute(&mut self, _: &mut Context<'_, A>, x: T) -> Result<()> {
        let acc = self.acc.take().unwrap_or_else(|| (self.zero)());
        self.acc = Some((self.fold)(acc, x));
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, A>) -> Result<()> {
        match self.acc.take() {
            Some(a) => ctx.emit(a),
            None if self.emit_empty => ctx.emit((self.zero)()),
            None => {}
        }
        Ok(())
    }
}
