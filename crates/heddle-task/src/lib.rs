//! The task system: users describe a graph of tasks; Heddle places task instances on
//! workers, moves data between them with dataflow operations, and runs them when their
//! input arrives — in batch or streaming mode — while tasks may still call BSP collectives.
//!
//! ```
//! use heddle_dataflow::Options;
//! use heddle_task::{
//!     Compute, Context, Edge, Job, Plan, Produced, Result, RoundRobin, Source, TaskGraph,
//!     WorkerSpec,
//! };
//!
//! /// Emits the numbers `0..n` of its share.
//! struct Numbers { next: u64, end: u64 }
//! impl Source for Numbers {
//!     type Out = u64;
//!     fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
//!         while self.next < self.end && ctx.emitted() < 1000 {
//!             ctx.emit(self.next);
//!             self.next += 1;
//!         }
//!         Ok(if self.next == self.end { Produced::Done } else { Produced::More })
//!     }
//! }
//! /// Adds up what it receives.
//! struct Total(std::sync::Arc<std::sync::atomic::AtomicU64>);
//! impl Compute for Total {
//!     type In = u64;
//!     type Out = ();
//!     fn execute(&mut self, _: &mut Context<'_, ()>, x: u64) -> Result<()> {
//!         self.0.fetch_add(x, std::sync::atomic::Ordering::Relaxed);
//!         Ok(())
//!     }
//! }
//!
//! let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).unwrap();
//! let sum = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
//! let mut g = TaskGraph::new();
//! let numbers =
//!     g.source("numbers", 2, |i| Numbers { next: i as u64 * 50, end: i as u64 * 50 + 50 });
//! let s = sum.clone();
//! let total = g.compute("total", 1, move |_| Total(s.clone()));
//! g.connect(&numbers, &total, Edge::hash());
//! let plan = Plan::new(&g, &WorkerSpec::discover(&comm).unwrap(), &RoundRobin).unwrap();
//! Job::new(&comm, &g, &plan, Options::batch()).unwrap().run().unwrap();
//! assert_eq!(sum.load(std::sync::atomic::Ordering::Relaxed), (0..100).sum::<u64>());
//! ```

mod admission;
mod amount;
pub mod bridge_task;
mod cgroup;
pub mod checkpoint;
mod edge;
mod error;
mod exec;
mod expected;
mod graph;
mod isolation;
mod ledger;
mod offer;
mod plan;
pub mod ports;
mod resources;
mod schedule;
mod strategy;
mod task;

pub use admission::{parse_admission_timeout, Admission, ADMISSION_ENV, ADMISSION_TIMEOUT_ENV};
pub use amount::{format_bytes, kubernetes_cpus, parse_bytes, parse_cpus};
pub use checkpoint::{CheckpointStats, Checkpointing, LoopCheckpointing};
pub use edge::{Edge, EdgeKind, Record};
pub use error::{Error, ErrorVariant, Result};
pub use exec::{AbortHandle, Context, Job, Report, StopHandle, TaskStats, THREADS_ENV};
pub use expected::Expected;
pub use graph::{TaskGraph, Vertex, VertexKind};
pub use isolation::{
    set_fork_hooks, CallFailed, CostTable, Enforcement, ForkHooks, Isolated, Isolation,
    ProcessUsage, COSTS,
};
pub use offer::{Offer, CPUS_PER_WORKER_ENV, MEMORY_PER_WORKER_ENV};
pub use plan::{Plan, PlannedEdge};
pub use resources::{
    Resources, WorkerSpec, TASK_CPUS_ENV, TASK_IO_ENV, TASK_ISOLATION_ENV, TASK_MEMORY_ENV,
    TASK_NET_ENV,
};
pub use schedule::{DataLocality, FirstFit, RoundRobin, Scheduler, VertexShape};
pub use strategy::Strategy;
pub use task::{Compute, Produced, Source, TaskInfo};
