//! Edges of a task graph: a dataflow operation and its functions, between the instances
//! of two vertices. `T` is what the upstream tasks emit, `U` what the downstream tasks
//! receive.

use std::hash::Hash;
use std::sync::Arc;

use crate::checkpoint::Codec;
use heddle_comm::Communicator;
use heddle_dataflow::{
    EdgeSpec, Gather, KeyedGather, KeyedReduce, Operation, Options, Partition, Reduce, Sort, TaskId,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A boxed dataflow operation between the instances of two vertices.
pub(crate) type BoxedOp<T, U> = Box<dyn Operation<In = T, Out = U>>;

pub(crate) type MakeOp<T, U> =
    Arc<dyn Fn(&Communicator, EdgeSpec, Options) -> heddle_dataflow::Result<BoxedOp<T, U>>>;

/// How an edge connects instances; decides whether it can be chained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum EdgeKind {
    /// Instance i to instance i.
    Direct,
    /// To the instance a function (or a hash) picks.
    Partition,
    /// To every downstream instance.
    Broadcast,
    /// Every record to every downstream instance, tagged with its source.
    Gather,
    /// All records combined into one value per downstream instance.
    Reduce,
    /// Records grouped by key, values combined per key.
    KeyedReduce,
    /// Records grouped by key, values collected per key.
    KeyedGather,
    /// Records range-partitioned by key, each range sorted.
    Sort,
}

/// An edge's operation, before it is placed.
pub struct Edge<T, U> {
    pub(crate) kind: EdgeKind,
    pub(crate) make: MakeOp<T, U>,
    /// Direct edges can hand records over in memory, unserialized.
    pub(crate) chain: Option<fn(T) -> U>,
    /// The record types' codecs (unaligned checkpoints store records in flight).
    pub(crate) codecs: (Codec<T>, Codec<U>),
}

impl<T, U> std::fmt::Debug for Edge<T, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").field("kind", &self.kind).finish_non_exhaustive()
    }
}

/// What records crossing an edge must be: serializable (they may cross workers) and
/// clonable (a task with several outgoing edges sends each a copy), and may move between
/// a worker's executor threads.
pub trait Record: Serialize + DeserializeOwned + Clone + Send + 'static {}
impl<T: Serialize + DeserializeOwned + Clone + Send + 'static> Record for T {}

fn boxed<T, U, O>(op: heddle_dataflow::Result<O>) -> heddle_dataflow::Result<BoxedOp<T, U>>
where
    O: Operation<In = T, Out = U> + 'static,
{
    op.map(|o| Box::new(o) as BoxedOp<T, U>)
}

impl<T: Record> Edge<T, T> {
    /// Instance i sends to instance i (both vertices need the same parallelism). When
    /// the scheduler puts both on one worker the records pass in memory (chaining).
    pub fn direct() -> Edge<T, T> {
        Edge {
            kind: EdgeKind::Direct,
            make: Arc::new(|c, s, o| boxed(Partition::direct(c, s, o))),
            chain: Some(|t| t),
            codecs: (Codec::of(), Codec::of()),
        }
    }

    /// Each record goes to the downstream instance `partitioner` picks (modulo their number).
    pub fn partition(partitioner: impl Fn(&T) -> usize + Send + Sync + 'static) -> Edge<T, T> {
        let f = Arc::new(partitioner);
        Edge {
            kind: EdgeKind::Partition,
            make: Arc::new(move |c, s, o| {
                let f = f.clone();
                boxed(Partition::new(c, s, o, move |t| f(t)))
            }),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }

    /// Each record goes to the downstream instance its hash picks.
    pub fn hash() -> Edge<T, T> {
        Edge {
            kind: EdgeKind::Partition,
            make: Arc::new(|c, s, o| boxed(Partition::by_hash(c, s, o))),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }

    /// Every record goes to every downstream instance.
    pub fn broadcast() -> Edge<T, T> {
        Edge {
            kind: EdgeKind::Broadcast,
            make: Arc::new(|c, s, o| boxed(Partition::broadcast(c, s, o))),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }

    /// All records combined with `reducer` (associative, commutative) into one value per
    /// downstream instance: reduce with one instance, allreduce with several.
    pub fn reduce(reducer: impl Fn(T, T) -> T + Send + Sync + 'static) -> Edge<T, T> {
        let f = Arc::new(reducer);
        Edge {
            kind: EdgeKind::Reduce,
            make: Arc::new(move |c, s, o| {
                let f = f.clone();
                boxed(Reduce::new(c, s, o, move |a, b| f(a, b)))
            }),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }
}

impl<T: Record> Edge<T, (TaskId, T)> {
    /// Every record reaches every downstream instance, tagged with the task id of the
    /// instance that sent it: gather with one instance, allgather with several.
    pub fn gather() -> Edge<T, (TaskId, T)> {
        Edge {
            kind: EdgeKind::Gather,
            make: Arc::new(|c, s, o| boxed(Gather::new(c, s, o))),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }
}

impl<K: Record + Hash + Eq + Ord, V: Record> Edge<(K, V), (K, V)> {
    /// Records `(key, value)` grouped by key, values combined with `reducer`
    /// (associative, commutative); combined on the sending worker first in batch mode.
    pub fn keyed_reduce(
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
    ) -> Edge<(K, V), (K, V)> {
        let f = Arc::new(reducer);
        Edge {
            kind: EdgeKind::KeyedReduce,
            make: Arc::new(move |c, s, o| {
                let f = f.clone();
                boxed(KeyedReduce::new(c, s, o, move |a, b| f(a, b)))
            }),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }
}

impl<K: Record + Ord, V: Record> Edge<(K, V), (K, Vec<V>)> {
    /// Records `(key, value)` grouped by key, with every value of the key.
    pub fn keyed_gather() -> Edge<(K, V), (K, Vec<V>)> {
        Edge {
            kind: EdgeKind::KeyedGather,
            make: Arc::new(|c, s, o| boxed(KeyedGather::new(c, s, o))),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }
}

impl<K: Record + Ord, V: Record> Edge<(K, V), (K, V)> {
    /// Records `(key, value)` range-partitioned by ascending `splitters` (one fewer than
    /// the downstream instances: instance i receives the keys between splitter i − 1 and
    /// splitter i; with fewer, the last instances receive nothing) and, in batch mode,
    /// received sorted by key (equal keys in arrival order), spilling sorted runs to disk
    /// beyond the options' memory budget; the instances' outputs in order form a total order.
    pub fn sort(splitters: Vec<K>) -> Edge<(K, V), (K, V)> {
        let splitters = Arc::new(splitters);
        Edge {
            kind: EdgeKind::Sort,
            make: Arc::new(move |c, s, o| {
                // Extra splitters are dropped; fewer leave the last instances without records.
                let cut =
                    splitters.iter().take(s.targets.len().saturating_sub(1)).cloned().collect();
                boxed(Sort::new(c, s, o, cut))
            }),
            chain: None,
            codecs: (Codec::of(), Codec::of()),
        }
    }
}
