//! Stream sources that pull records as they become available, never blocking the
//! executor, and (most of them) replay: a checkpoint keeps where each partition is, and a
//! restored job goes on from there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use heddle_task::{Context, Produced, Result, Source};

/// Records a source emits per call.
const PER_CALL: usize = 4096;
/// How soon a source waiting for input from outside (a socket, a growing file) looks again.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// What a stream source has for the executor right now.
#[derive(Debug)]
pub(crate) enum Pulled<T> {
    /// A record.
    Item(T),
    /// Nothing yet (waiting on a socket, a file): look again soon.
    Pending,
    /// Nothing before this instant (a rate limit).
    Later(std::time::Instant),
    /// The stream has ended.
    End,
}

/// One partition of a stream source.
pub(crate) trait Puller<T>: Send + Sync {
    /// The next record, if there is one now.
    fn pull(&mut self) -> crate::Result<Pulled<T>>;

    /// Where the partition is, for a checkpoint: what follows this position is what is
    /// still to come (`None`: the source cannot replay, and is at most once).
    fn position(&self) -> Option<Vec<u8>> {
        None
    }

    /// Goes to a position [`Puller::position`] gave.
    ///
    /// # Errors
    /// A position that does not decode, or an input that cannot be reopened there.
    fn seek(&mut self, _position: &[u8]) -> crate::Result<()> {
        Ok(())
    }
}

/// A closure as a source that cannot replay.
impl<T, F: FnMut() -> crate::Result<Pulled<T>> + Send + Sync> Puller<T> for F {
    fn pull(&mut self) -> crate::Result<Pulled<T>> {
        self()
    }
}

/// Makes partition `i` of `p`'s puller (afresh for every pass).
pub(crate) type MakePull<T> = Arc<dyn Fn(u32, u32) -> Box<dyn Puller<T>> + Send + Sync>;

/// A stream source over a puller per partition.
pub(crate) struct PullSource<T> {
    pub(crate) name: &'static str,
    pub(crate) make: MakePull<T>,
    pub(crate) index: u32,
    pub(crate) parallelism: u32,
    pub(crate) pull: Option<Box<dyn Puller<T>>>,
    /// Whether this partition has ended (a stream runs one pass).
    pub(crate) ended: bool,
    /// Whether the source said it cannot replay (once for all partitions).
    pub(crate) warned: Arc<AtomicBool>,
}

impl<T> PullSource<T> {
    fn puller(&mut self) -> &mut Box<dyn Puller<T>> {
        let (make, index, p) = (&self.make, self.index, self.parallelism);
        self.pull.get_or_insert_with(|| make(index, p))
    }
}

/// A checkpoint's position of a partition: still going, or ended.
#[derive(serde::Serialize, serde::Deserialize)]
enum Position {
    At(Vec<u8>),
    Ended,
}

impl<T: Send + 'static> Source for PullSource<T> {
    type Out = T;

    fn next(&mut self, ctx: &mut Context<'_, T>) -> Result<Produced> {
        if self.ended {
            return Ok(Produced::Done);
        }
        if self.pull.is_none() {
            // Files, sockets and generators cannot say how many records they hold.
            heddle_comm::metrics::expect_records(None);
        }
        let pull = self.puller();
        let mut given = 0;
        let mut produced = Produced::More;
        for _ in 0..PER_CALL {
            match pull.pull().map_err(crate::Error::into_task)? {
                Pulled::Item(x) => {
                    given += 1;
                    ctx.emit(x);
                }
                // Input from outside rings no bell: look again within a millisecond.
                Pulled::Pending => {
                    ctx.wake_at(std::time::Instant::now() + POLL_EVERY);
                    break;
                }
                Pulled::Later(at) => {
                    ctx.wake_at(at);
                    break;
                }
                Pulled::End => {
                    self.pull = None;
                    self.ended = true;
                    produced = Produced::Done;
                    break;
                }
            }
        }
        heddle_comm::metrics::records_done(given);
        Ok(produced)
    }

    fn snapshot(&mut self, _: &mut Context<'_, T>, _: u64) -> Result<Option<Vec<u8>>> {
        let position = match self.ended {
            true => Some(Position::Ended),
            false => self.puller().position().map(Position::At),
        };
        let Some(position) = position else {
            if !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "heddle: warning: {} cannot replay: records it delivered after the last \
                     checkpoint are lost if the job restarts (at most once)",
                    self.name
                );
            }
            return Ok(None);
        };
        Ok(Some(bincode::serialize(&position).map_err(|e| {
            heddle_task::Error::Graph(format!("{}'s position does not encode: {e}", self.name))
        })?))
    }

    fn restore(&mut self, ctx: &mut Context<'_, T>, state: &[u8]) -> Result<()> {
        let position: Position = bincode::deserialize(state).map_err(|e| {
            heddle_task::Error::Graph(format!(
                "{}[{}]: its checkpointed position does not decode: {e}",
                self.name,
                ctx.index()
            ))
        })?;
        match position {
            Position::Ended => {
                self.ended = true;
                Ok(())
            }
            Position::At(at) => self.puller().seek(&at).map_err(crate::Error::into_task),
        }
    }
}
