//! Ports and arbiters (CCR): typed message queues and the rules that run handlers when
//! messages arrive, on a pool of dispatcher threads.
//!
//! This is the in-worker coordination layer of the task system, after Microsoft's
//! Concurrency and Coordination Runtime. A [`Port`] is an unbounded queue; posting to it
//! is the send. An *arbiter*, activated on a [`DispatcherQueue`], watches one or more
//! ports and queues a handler on its [`Dispatcher`] when its condition holds:
//!
//! | arbiter | runs its handler with |
//! |---|---|
//! | [`receive`] | each item of one port |
//! | [`multiple_receive`] | exactly `n` items of one port |
//! | [`join`] | one item of each of two ports, taken together |
//! | [`choice`] | the first item of any branch; the others are cancelled |
//! | [`interleave`] | items of concurrent / exclusive / teardown groups, reader/writer style |
//!
//! [`receive`]: DispatcherQueue::receive
//! [`multiple_receive`]: DispatcherQueue::multiple_receive
//! [`join`]: DispatcherQueue::join
//! [`choice`]: DispatcherQueue::choice
//! [`interleave`]: DispatcherQueue::interleave
//!
//! Receivers are one-shot or persistent; every activation returns an [`Activation`] to
//! cancel it. Long-running code can instead block on a port with
//! [`Port::take_timeout`] (the rendezvous, MPI-style receive). The `ccr_bench` example
//! measures the overhead per stage of the CCR paper's spawned and rendezvous patterns.
//!
//! ```
//! use heddle_task::ports::{Dispatcher, Port};
//! use std::time::Duration;
//!
//! let dispatcher = Dispatcher::new(2)?;
//! let queue = dispatcher.queue();
//! let (numbers, sums) = (Port::<u64>::new(), Port::new());
//!
//! // Sum every three numbers, for as long as numbers come.
//! let out = sums.clone();
//! let summing = queue.multiple_receive(true, 3, &numbers, move |batch: Vec<u64>| {
//!     out.post(batch.iter().sum::<u64>())
//! });
//! for n in 1..=6 {
//!     numbers.post(n);
//! }
//! let mut got = vec![
//!     sums.take_timeout(Duration::from_secs(10)),
//!     sums.take_timeout(Duration::from_secs(10)),
//! ];
//! got.sort();
//! assert_eq!(got, [Some(6), Some(15)]);
//! summing.cancel();
//! # Ok::<(), std::io::Error>(())
//! ```

mod arbiter;
mod choice;
mod dispatcher;
mod interleave;
mod join;
mod port;
mod receive;

pub use arbiter::Activation;
pub use choice::Choice;
pub use dispatcher::{Dispatcher, DispatcherQueue};
pub use interleave::Interleave;
pub use port::Port;
