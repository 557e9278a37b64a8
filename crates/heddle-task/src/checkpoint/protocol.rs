//! The messages between the coordinator (rank 0) and the workers, on the job's control
//! edge.

use heddle_dataflow::TaskId;
use serde::{Deserialize, Serialize};

/// A control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Message {
    /// Coordinator → workers: take checkpoint `id` (`last`: the sources have all ended).
    Trigger { id: u64, last: bool },
    /// Worker → coordinator: every task of the worker has written its state of `id`
    /// (`unaligned`: how many stored records in flight).
    Ack {
        id: u64,
        bytes: u64,
        states: Vec<TaskId>,
        #[serde(default)]
        unaligned: usize,
    },
    /// Worker → coordinator: a state of `id` could not be written.
    Decline { id: u64, reason: String },
    /// Worker → coordinator: the worker's tasks have all ended.
    Finished,
    /// Coordinator → workers: checkpoint `id` is complete.
    Complete { id: u64 },
    /// Coordinator → workers: checkpoint `id` failed; its files go.
    Abort { id: u64, reason: String },
}

impl Message {
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Message> {
        serde_json::from_slice(bytes).ok()
    }
}
