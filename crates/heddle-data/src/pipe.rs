//! `DataSet::pipe`: every partition's records through a program in any language (Spark's
//! `rdd.pipe`, but framed, typed and fast): each partition starts the program once as a
//! bridged filter (`spec/bridge.md`), sends its records in order and gets its results back
//! as they come, then the filter's `finalize` results.

use heddle_bridge::{BridgeConfig, FilterCommand, FromRecord, IntoRecord, Transport};
use heddle_task::bridge_task::BridgeTask;
use heddle_task::{Edge, Record};

use std::marker::PhantomData;

use crate::tasks::Identity;
use crate::DataSet;

impl<T: Record + IntoRecord> DataSet<T> {
    /// The results of running `command` (an SDK's filter, in any language) over each
    /// partition, through `transport`. Records go as `T`'s [`IntoRecord`] says (text as
    /// UTF-8, `Vec<f64>` as an f64 array, …) and come back as `U`.
    ///
    /// ```no_run
    /// use heddle_bridge::{FilterCommand, Transport};
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let words = s.from_vec(vec!["a".to_string(), "b".to_string()]);
    /// let up: heddle_data::DataSet<String> =
    ///     words.pipe(FilterCommand::new("python3").arg("upper.py"), Transport::Pipe);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pipe<U: Record + FromRecord>(
        &self,
        command: FilterCommand,
        transport: Transport,
    ) -> DataSet<U> {
        self.pipe_with(command, BridgeConfig::new("pipe").transport(transport))
    }

    /// As [`DataSet::pipe`], with every setting of the bridge (`init` arguments, credits,
    /// record limit, timeouts).
    pub fn pipe_with<U: Record + FromRecord>(
        &self,
        command: FilterCommand,
        config: BridgeConfig,
    ) -> DataSet<U> {
        self.then("pipe", Edge::direct, move |_| {
            BridgeTask::<T, U>::new(command.clone(), config.clone())
        })
    }
}

impl<T: Record> DataSet<T> {
    /// The same records, each in the partition `f(record)` picks (modulo the partition
    /// count): Spark's `partitionBy`. Records with the same `f` value meet in one partition
    /// (a keyed stage after it, such as a bridged counter, sees all of a key).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?.with_partitions(2)?;
    /// let parts = s.range(0, 6).partition_by(|x| *x % 2).map_partitions(|p| vec![p]);
    /// assert_eq!(parts.collect()?, Some(vec![vec![0, 2, 4], vec![1, 3, 5]]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_by(&self, f: impl Fn(&T) -> u64 + Send + Sync + 'static) -> DataSet<T> {
        let f = std::sync::Arc::new(f);
        self.then(
            "partition_by",
            move || {
                let f = f.clone();
                Edge::partition(move |t: &T| f(t) as usize)
            },
            |_| Identity(PhantomData),
        )
    }
}
