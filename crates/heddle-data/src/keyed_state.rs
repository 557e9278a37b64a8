//! Keyed state on streams: each key's own value, kept across records and checkpoints
//! (Flink's keyed `ValueState`, Spark's `mapGroupsWithState`).

use std::hash::Hash;
use std::sync::Arc;

use heddle_task::{Compute, Context, Edge, Record};

use crate::keyed::key_partition;
use crate::stream::Stream;
use crate::tasks::Table;

/// A key's state function: the record's key, its value, the key's state (`None` before
/// its first record); returns the record to emit.
type StateFn<K, V, S, U> = Arc<dyn Fn(&K, V, &mut Option<S>) -> U + Send + Sync>;

/// Keeps each key's state of one key range, snapshotted at checkpoints.
struct KeyedStateTask<K, V, S, U> {
    f: StateFn<K, V, S, U>,
    table: Table<K, Option<S>>,
}

impl<K, V, S, U> Compute for KeyedStateTask<K, V, S, U>
where
    K: Record + Hash + Eq,
    V: Send + 'static,
    S: Record,
    U: Send + 'static,
{
    type In = (K, V);
    type Out = U;

    fn execute(&mut self, ctx: &mut Context<'_, U>, (k, v): (K, V)) -> heddle_task::Result<()> {
        // A lookup by reference first: most keys are already there.
        let out = match self.table.get_mut(&k) {
            Some(slot) => {
                let out = (self.f)(&k, v, slot);
                if slot.is_none() {
                    self.table.remove(&k);
                }
                out
            }
            None => {
                let mut slot = None;
                let out = (self.f)(&k, v, &mut slot);
                if slot.is_some() {
                    self.table.insert(k, slot);
                }
                out
            }
        };
        ctx.emit(out);
        Ok(())
    }

    fn snapshot(&mut self, _: &mut Context<'_, U>, _: u64) -> heddle_task::Result<Option<Vec<u8>>> {
        let entries: Vec<(&K, &S)> =
            self.table.iter().filter_map(|(k, s)| s.as_ref().map(|s| (k, s))).collect();
        bincode::serialize(&entries)
            .map(Some)
            .map_err(|e| heddle_task::Error::Graph(format!("keyed state does not encode: {e}")))
    }

    fn restore(&mut self, ctx: &mut Context<'_, U>, state: &[u8]) -> heddle_task::Result<()> {
        let entries: Vec<(K, S)> = bincode::deserialize(state).map_err(|e| {
            heddle_task::Error::Graph(format!(
                "{}: its checkpointed keyed state does not decode (another state type?): {e}",
                ctx.info()
            ))
        })?;
        self.table = entries.into_iter().map(|(k, s)| (k, Some(s))).collect();
        Ok(())
    }
}

impl<K: Record + Hash + Eq, V: Record> Stream<(K, V)> {
    /// Each record through `f(key, value, state)`, where `state` is the key's own value
    /// (`None` before the key's first record; set it to `None` to drop the key), kept
    /// across records and, with checkpoints, restored after a failure so that each
    /// record counts once.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let words = s.stream_from_vec(vec![('a', 1), ('b', 1), ('a', 1)]);
    /// // A running count per key.
    /// let counts = words.map_with_state(|k: &char, _, n: &mut Option<u64>| {
    ///     let c = n.unwrap_or(0) + 1;
    ///     *n = Some(c);
    ///     format!("{k}={c}")
    /// });
    /// counts.run(move |_, x| Ok(tx.send(x).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec!["a=1", "b=1", "a=2"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_with_state<S: Record, U: Record>(
        &self,
        f: impl Fn(&K, V, &mut Option<S>) -> U + Send + Sync + 'static,
    ) -> Stream<U> {
        let p = self.data.parallelism();
        let f: StateFn<K, V, S, U> = Arc::new(f);
        let states = self.data.then(
            "map_with_state",
            move || Edge::partition(move |(k, _): &(K, V)| key_partition(k, p as usize)),
            move |_| KeyedStateTask { f: f.clone(), table: Table::default() },
        );
        self.wrap(states)
    }
}
