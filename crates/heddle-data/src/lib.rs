//! The data API: lazy distributed data sets, compiled into task graphs.
//!
//! Every worker runs the same program. A [`Session`] makes [`DataSet`]s from files,
//! collections and generators; transformations (`map`, `filter`, `reduce_by_key`,
//! `join`, `sort_by_key` ...) describe new data sets without running anything; actions
//! (`collect`, `count`, `reduce`, `write_text` ...) compile what they need into one task
//! graph — record-wise steps as tasks chained in memory, shuffles as dataflow operations —
//! and run it on every worker. [`DataSet::explain`] shows the plan.
//!
//! ```
//! let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).unwrap();
//! let s = heddle_data::Session::new(comm).unwrap();
//! let words = s.from_vec(vec!["a b a".to_string(), "b a".to_string()]);
//! let counts = words
//!     .flat_map(|line| line.split(' ').map(|w| (w.to_string(), 1u64)).collect::<Vec<_>>())
//!     .reduce_by_key(|a, b| a + b)
//!     .sort_by_key()
//!     .unwrap();
//! assert_eq!(counts.collect().unwrap(), Some(vec![("a".to_string(), 3), ("b".to_string(), 2)]));
//! ```

mod actions;
mod bytes_key;
mod checkpoint;
mod chunks;
mod combine;
mod dataset;
mod error;
mod input_files;
mod iterate;
mod keyed;
mod keyed_state;
mod lines;
mod materialize;
mod output;
mod parquet_io;
mod pipe;
mod pull;
mod pullers;
mod redis_io;
mod redis_sink;
mod session;
mod sinks;
mod sort_task;
mod sources;
mod stream;
mod stream_checkpoints;
mod stream_sources;
mod tasks;
mod text_blocks;
mod txn_sink;
mod window;
mod window_stamp;
mod window_state;

/// Locks shared state of a data set's tasks. Every critical section leaves the state
/// consistent, so a lock poisoned by a panicking task is still usable.
pub(crate) trait Locked<T> {
    fn locked(&self) -> std::sync::MutexGuard<'_, T>;

    /// Takes the state out, leaving its default.
    fn taken(&self) -> T
    where
        T: Default,
    {
        std::mem::take(&mut *self.locked())
    }
}

impl<T> Locked<T> for std::sync::Mutex<T> {
    fn locked(&self) -> std::sync::MutexGuard<'_, T> {
        self.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub use bytes_key::BytesKey;
pub use checkpoint::LoopCheckpoints;
pub use combine::Combiner;
pub use dataset::DataSet;
pub use error::{Error, ErrorVariant, Result};
pub use input_files::list_files;
pub use iterate::{Checkpointing, IterateOptions};
pub use output::{Commit, Output, Veto, WriteMode, SUCCESS};
pub use redis_io::RedisEntry;
pub use session::Session;
pub use sinks::PartWriter;
pub use sources::OnMalformed;
pub use stream::Stream;
pub use stream_checkpoints::{alignment_timeout_from_env, default_dir, run_dir};
pub use text_blocks::{TextBlocks, MAX_LINE_BYTES};
pub use window::{now_ms, Time, Window, WindowKind, Windowed};
