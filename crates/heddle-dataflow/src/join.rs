//! Join: two inputs keyed alike — the records of the left sources and of the right
//! sources — meet at the target their key hashes to. Inner, left, right and full outer
//! joins. The hash algorithm keeps both sides in memory per key; in streaming mode it
//! emits each match as soon as its second half arrives (a symmetric hash join) and the
//! unmatched rows of outer joins at the end. The sort-merge algorithm (batch mode only)
//! sorts both sides by key with disk spill and merges them at the end; batch results come
//! in key order either way.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::arrivals::Incoming;
use super::codec::records;
use super::codec::{decode, split_keyed};
use super::edge_core::EdgeCore;
use super::keyed_gather::{hashed_target, key_order, offer_keyed, sort_in};
use super::semantics::{Dataflow, Semantics};
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::spill::SpillSorter;
use crate::{Error, Result};
use heddle_comm::Communicator;

/// Which rows a join keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Only keys on both sides.
    Inner,
    /// Every left row, with `None` where no right row matches.
    Left,
    /// Every right row, with `None` where no left row matches.
    Right,
    /// Every row of both sides.
    Full,
}

/// How a join is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinAlgorithm {
    /// In-memory hash tables per key (streaming or batch).
    Hash,
    /// External sort of both sides, then a merge (batch only; spills to disk).
    SortMerge,
}

/// What a join pairs: which sources are its left side, which rows it keeps, and how it
/// is computed.
///
/// ```
/// use heddle_dataflow::{JoinAlgorithm, JoinKind, JoinOn};
/// let on = JoinOn::new(JoinKind::Left, vec![0, 1]).algorithm(JoinAlgorithm::SortMerge);
/// assert_eq!((on.kind, on.algorithm), (JoinKind::Left, JoinAlgorithm::SortMerge));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinOn {
    /// The sources (a subset of the edge's) that offer `Side::Left` records; the others
    /// offer `Side::Right` ones.
    pub left_sources: Vec<TaskId>,
    /// Which rows the join keeps.
    pub kind: JoinKind,
    /// How it is computed (default: hash).
    pub algorithm: JoinAlgorithm,
}

impl JoinOn {
    /// A `kind` join whose left side is `left_sources`, computed with hash tables.
    pub fn new(kind: JoinKind, left_sources: Vec<TaskId>) -> JoinOn {
        JoinOn { left_sources, kind, algorithm: JoinAlgorithm::Hash }
    }

    /// The same join computed with `algorithm`.
    pub fn algorithm(mut self, algorithm: JoinAlgorithm) -> JoinOn {
        self.algorithm = algorithm;
        self
    }
}

/// One input record of a join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side<L, R> {
    /// From a left source.
    Left(L),
    /// From a right source.
    Right(R),
}

/// A joined row: key, left value, right value.
pub type Joined<K, L, R> = (K, Option<L>, Option<R>);

type Rows<K, L, R> = VecDeque<Event<Joined<K, L, R>>>;

#[derive(Debug)]
struct Sides<L, R> {
    left: Vec<L>,
    right: Vec<R>,
    left_matched: Vec<bool>,
    right_matched: Vec<bool>,
}

impl<L, R> Default for Sides<L, R> {
    fn default() -> Self {
        Sides {
            left: Vec::new(),
            right: Vec::new(),
            left_matched: Vec::new(),
            right_matched: Vec::new(),
        }
    }
}

/// Both sides of each key, by encoded key (with the decoded key).
type Table<K, L, R> = HashMap<Vec<u8>, (Option<K>, Sides<L, R>)>;

enum Held<K, L, R> {
    Hash(Table<K, L, R>),
    Sorted(SpillSorter),
}

/// The semantics of [`Join`].
pub struct Joining<K, L, R> {
    left_sources: HashSet<TaskId>,
    kind: JoinKind,
    held: HashMap<TaskId, Held<K, L, R>>,
}

impl<K, L, R> std::fmt::Debug for Joining<K, L, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joining").field("kind", &self.kind).finish_non_exhaustive()
    }
}

/// See the module docs.
pub type Join<K, L, R> = Dataflow<Joining<K, L, R>>;

impl<K, L, R> Dataflow<Joining<K, L, R>>
where
    K: Serialize + DeserializeOwned + Ord + Clone + 'static,
    L: Serialize + DeserializeOwned + Clone,
    R: Serialize + DeserializeOwned + Clone,
{
    /// A join of the edge `spec`'s sources as `on` says.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for left sources outside the edge, sort-merge in
    /// streaming mode, or a bad edge specification or spill directory.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options, on: JoinOn) -> Result<Self> {
        let JoinOn { left_sources, kind, algorithm } = on;
        if let Some(s) = left_sources.iter().find(|s| !spec.sources.contains(s)) {
            return Err(Error::InvalidArgument(format!(
                "left source {s} is not a source of the edge"
            )));
        }
        if algorithm == JoinAlgorithm::SortMerge && opts.mode == Mode::Streaming {
            return Err(Error::InvalidArgument(
                "a sort-merge join needs batch mode; use JoinAlgorithm::Hash for streams".into(),
            ));
        }
        let core = EdgeCore::new(comm, spec, &opts)?;
        let mut held = HashMap::new();
        for &t in &core.local_targets {
            let h = match algorithm {
                JoinAlgorithm::Hash => Held::Hash(HashMap::new()),
                JoinAlgorithm::SortMerge => {
                    Held::Sorted(SpillSorter::new(opts.spill.clone(), Some(key_order::<K>()))?)
                }
            };
            held.insert(t, h);
        }
        Ok(Dataflow::from_parts(
            core,
            Joining { left_sources: left_sources.into_iter().collect(), kind, held },
        ))
    }
}

impl<K, L, R> Semantics for Joining<K, L, R>
where
    K: Serialize + DeserializeOwned + Ord + Clone + 'static,
    L: Serialize + DeserializeOwned + Clone,
    R: Serialize + DeserializeOwned + Clone,
{
    type In = (K, Side<L, R>);
    type Out = Joined<K, L, R>;

    fn offer(
        &mut self,
        core: &mut EdgeCore,
        source: TaskId,
        item: (K, Side<L, R>),
    ) -> Result<Offer<(K, Side<L, R>)>> {
        let is_left = matches!(item.1, Side::Left(_));
        if is_left != self.left_sources.contains(&source) {
            return Err(Error::InvalidArgument(format!(
                "source {source} offered a record of the wrong side of the join"
            )));
        }
        let target = hashed_target(core, &item.0)?;
        offer_keyed(core, source, target, item)
    }

    fn take(
        &mut self,
        core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut Rows<K, L, R>,
    ) -> Result<()> {
        let streaming = core.mode == Mode::Streaming;
        let held = self.held.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { payload, .. } => match held {
                Held::Sorted(sorter) => sort_in(sorter, &payload)?,
                Held::Hash(map) => {
                    for rec in records(&payload) {
                        let (key_bytes, side_bytes) = split_keyed(rec?)?;
                        let side = decode::<Side<L, R>>(side_bytes)?;
                        let (k, sides) = map
                            .entry(key_bytes.to_vec())
                            .or_insert_with(|| (decode::<K>(key_bytes).ok(), Sides::default()));
                        let k = k.clone().ok_or_else(|| {
                            Error::InvalidArgument("an undecodable join key".into())
                        })?;
                        add(sides, side, streaming.then_some((&k, &mut *out)));
                    }
                }
            },
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                let rows = match std::mem::replace(held, Held::Hash(HashMap::new())) {
                    Held::Hash(map) => {
                        let sorted: BTreeMap<K, Sides<L, R>> =
                            map.into_values().filter_map(|(k, s)| k.map(|k| (k, s))).collect();
                        sorted
                            .into_iter()
                            .flat_map(|(k, s)| finish_key(k, s, self.kind, streaming))
                            .collect::<Vec<_>>()
                    }
                    Held::Sorted(sorter) => {
                        let mut rows = Vec::new();
                        for group in sorter.finish()?.group_by_key() {
                            let (k, vs) = group?;
                            let mut sides = Sides::default();
                            for v in vs {
                                add::<K, L, R>(&mut sides, decode::<Side<L, R>>(&v)?, None);
                            }
                            rows.extend(finish_key(decode::<K>(&k)?, sides, self.kind, false));
                        }
                        rows
                    }
                };
                out.extend(rows.into_iter().map(Event::Data));
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}

/// Stores one side's value and marks the rows it matches; in streaming mode (`emit`)
/// emits those matches at once.
fn add<K: Clone, L: Clone, R: Clone>(
    s: &mut Sides<L, R>,
    side: Side<L, R>,
    mut emit: Option<(&K, &mut Rows<K, L, R>)>,
) {
    match side {
        Side::Left(l) => {
            for (r, m) in s.right.iter().zip(s.right_matched.iter_mut()) {
                *m = true;
                if let Some((k, out)) = emit.as_mut() {
                    out.push_back(Event::Data(((*k).clone(), Some(l.clone()), Some(r.clone()))));
                }
            }
            s.left_matched.push(!s.right.is_empty());
            s.left.push(l);
        }
        Side::Right(r) => {
            for (l, m) in s.left.iter().zip(s.left_matched.iter_mut()) {
                *m = true;
                if let Some((k, out)) = emit.as_mut() {
                    out.push_back(Event::Data(((*k).clone(), Some(l.clone()), Some(r.clone()))));
                }
            }
            s.right_matched.push(!s.left.is_empty());
            s.right.push(r);
        }
    }
}

/// The rows of one key at the end: all matches (unless already emitted while
/// streaming) and the unmatched rows the join kind keeps.
fn finish_key<K: Clone, L: Clone, R: Clone>(
    k: K,
    s: Sides<L, R>,
    kind: JoinKind,
    streamed: bool,
) -> Vec<Joined<K, L, R>> {
    let mut rows = Vec::new();
    if !streamed {
        for l in &s.left {
            for r in &s.right {
                rows.push((k.clone(), Some(l.clone()), Some(r.clone())));
            }
        }
    }
    if matches!(kind, JoinKind::Left | JoinKind::Full) {
        let unmatched = s.left.iter().zip(&s.left_matched).filter(|(_, &m)| !m);
        rows.extend(unmatched.map(|(l, _)| (k.clone(), Some(l.clone()), None)));
    }
    if matches!(kind, JoinKind::Right | JoinKind::Full) {
        let unmatched = s.right.iter().zip(&s.right_matched).filter(|(_, &m)| !m);
        rows.extend(unmatched.map(|(r, _)| (k.clone(), None, Some(r.clone()))));
    }
    rows
}
