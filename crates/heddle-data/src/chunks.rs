//! `Stream::map_chunks`: record-wise work in batches on a stream — each partition's
//! records gathered into chunks of at most `max_records`, a chunk handed over early when
//! `max_delay` has passed since its first record arrived or the input ends (the
//! micro-batches Spark's `mapInPandas` and Flink's bundles give vectorized code).

use std::sync::Arc;
use std::time::{Duration, Instant};

use heddle_task::{Compute, Context, Edge, Record, Result, Strategy};

use crate::stream::Stream;

type ChunkFn<T, U> = Arc<dyn Fn(Vec<T>) -> Vec<U> + Send + Sync>;

/// How often a partition checks whether its chunk has waited long enough.
const CHECK: Duration = Duration::from_millis(1);

/// Gathers records into chunks and maps each chunk.
struct ChunkTask<T, U> {
    f: ChunkFn<T, U>,
    max_records: usize,
    max_delay: Duration,
    chunk: Vec<T>,
    /// When the chunk's first record arrived.
    since: Option<Instant>,
}

impl<T: Send + 'static, U: Send + 'static> ChunkTask<T, U> {
    fn flush(&mut self, ctx: &mut Context<'_, U>) {
        self.since = None;
        if self.chunk.is_empty() {
            return;
        }
        let chunk =
            std::mem::replace(&mut self.chunk, Vec::with_capacity(self.max_records.min(1 << 16)));
        for y in (self.f)(chunk) {
            ctx.emit(y);
        }
    }
}

impl<T: Send + 'static, U: Send + 'static> Compute for ChunkTask<T, U> {
    type In = T;
    type Out = U;

    fn execute(&mut self, ctx: &mut Context<'_, U>, x: T) -> Result<()> {
        self.since.get_or_insert_with(Instant::now);
        self.chunk.push(x);
        if self.chunk.len() >= self.max_records {
            self.flush(ctx);
        }
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Context<'_, U>) -> Result<()> {
        if self.since.is_some_and(|t| t.elapsed() >= self.max_delay) {
            self.flush(ctx);
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, U>) -> Result<()> {
        self.flush(ctx);
        Ok(())
    }

    /// A checkpoint hands the chunk over first: what it emits goes before the barrier, so
    /// the checkpoint covers it and there is nothing to keep.
    fn snapshot(&mut self, ctx: &mut Context<'_, U>, _: u64) -> Result<Option<Vec<u8>>> {
        self.flush(ctx);
        Ok(None)
    }
}

impl<T: Record> Stream<T> {
    /// Maps chunks of each partition's records with `f`: a chunk holds at most
    /// `max_records` consecutive records (at least 1), and is handed over early once
    /// `max_delay` has passed since its first record arrived (checked every millisecond)
    /// or when the input ends. `f` returns the records to emit, in any number.
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let records = s.stream_from_vec((0..5u32).collect());
    /// let sums = records.map_chunks(2, Duration::from_secs(60), |c| vec![c.iter().sum::<u32>()]);
    /// sums.run(move |_, x| Ok(tx.send(x).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 5, 4]); // [0 1] [2 3] [4]
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_chunks<U: Record>(
        &self,
        max_records: usize,
        max_delay: Duration,
        f: impl Fn(Vec<T>) -> Vec<U> + Send + Sync + 'static,
    ) -> Stream<U> {
        let f: ChunkFn<T, U> = Arc::new(f);
        let max_records = max_records.max(1);
        let chunks = self.data.then_with(
            "map_chunks",
            Edge::direct,
            move |_| ChunkTask {
                f: f.clone(),
                max_records,
                max_delay,
                chunk: Vec::new(),
                since: None,
            },
            Strategy::on_data().every(CHECK),
        );
        self.wrap(chunks)
    }
}
