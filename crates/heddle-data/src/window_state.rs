//! A window's state in a checkpoint: the watermark of each input, the open time windows
//! with their keys' values, count windows' records, and sessions.

use std::hash::Hash;

use heddle_task::Record;
use serde::{Deserialize, Serialize};

use crate::tasks::Table;
use crate::window::{Open, WindowTask};

/// What [`WindowTask`] keeps, in a form that encodes.
#[derive(Serialize, Deserialize)]
struct Saved<K, V> {
    marks: Vec<(u32, u64)>,
    /// (end, start) and each key's (value, records, fired).
    open: Vec<((u64, u64), Vec<(K, V, u64, bool)>)>,
    counts: Vec<(K, u64, Vec<V>)>,
    sessions: Vec<(K, Vec<(u64, u64, V, u64)>)>,
}

impl<K: Record + Ord + Hash + Eq, V: Record> WindowTask<K, V> {
    /// The state, encoded.
    pub(crate) fn save(&self) -> heddle_task::Result<Vec<u8>> {
        let saved = Saved {
            marks: self.marks.iter().map(|(&s, &m)| (s, m)).collect(),
            open: self
                .open
                .iter()
                .map(|(&span, keys)| {
                    let keys = keys
                        .iter()
                        .map(|(k, o)| (k.clone(), o.value.clone(), o.records, o.fired))
                        .collect();
                    (span, keys)
                })
                .collect(),
            counts: self
                .counts
                .iter()
                .map(|(k, (n, held))| (k.clone(), *n, held.iter().cloned().collect()))
                .collect(),
            sessions: self.sessions.iter().map(|(k, s)| (k.clone(), s.clone())).collect(),
        };
        bincode::serialize(&saved).map_err(|e| {
            heddle_task::Error::Graph(format!("a window's state does not encode: {e}"))
        })
    }

    /// Puts back a state [`WindowTask::save`] made.
    pub(crate) fn load(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let saved: Saved<K, V> = bincode::deserialize(bytes)
            .map_err(|e| format!("its checkpointed windows do not decode: {e}"))?;
        self.marks = saved.marks.into_iter().collect();
        self.open = saved
            .open
            .into_iter()
            .map(|(span, keys)| {
                let mut table = Table::default();
                for (k, value, records, fired) in keys {
                    table.insert(k, Open { value, records, fired });
                }
                (span, table)
            })
            .collect();
        self.counts = saved.counts.into_iter().map(|(k, n, held)| (k, (n, held.into()))).collect();
        self.sessions = saved.sessions.into_iter().collect();
        Ok(())
    }
}
