//! A pass on a pool of executor threads. Chains of task instances (joined by chained
//! edges) are spread over the threads, each chain on one thread so its records still pass
//! in memory without locks contending; the calling thread drives the edges' dataflow
//! operations. Threads with nothing to do park until data or a timer wakes them.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use heddle_comm::JobAbort;
use heddle_dataflow::TaskId;

use super::edge_run::EdgeRun;
use super::job::{AbortHandle, StopHandle};
use super::task_run::TaskRun;
use crate::{Plan, Result};

/// Idle rounds a thread spins, then yields, before it parks.
const SPIN_ROUNDS: u32 = 64;
const YIELD_ROUNDS: u32 = 256;
/// The longest a parked thread sleeps before looking again (wake-ups usually come first).
const PARK: Duration = Duration::from_millis(1);

/// Splits the local task instances (`ids[i]` is the task id of instance `i`) into at most
/// `threads` groups: instances joined by a chained edge share a group; chains go to the
/// least loaded group, largest first. Deterministic.
pub(crate) fn groups(ids: &[TaskId], plan: &Plan, threads: usize) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let at = |t: TaskId| ids.iter().position(|&x| x == t);
    for e in plan.edges.iter().filter(|e| e.chained) {
        for i in 0..plan.vertices[e.from].2 {
            if let (Some(a), Some(b)) =
                (at(plan.first_task[e.from] + i), at(plan.first_task[e.to] + i))
            {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
    }
    let mut chains: Vec<Vec<usize>> = Vec::new();
    let mut chain_of = vec![usize::MAX; ids.len()];
    for i in 0..ids.len() {
        let r = root(&mut parent, i);
        if chain_of[r] == usize::MAX {
            chain_of[r] = chains.len();
            chains.push(Vec::new());
        }
        chains[chain_of[r]].push(i);
    }
    chains.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); threads.clamp(1, chains.len().max(1))];
    for chain in chains {
        let g = (0..out.len()).min_by_key(|&g| (out[g].len(), g)).unwrap_or(0);
        out[g].extend(chain);
    }
    out.retain(|g| !g.is_empty());
    for g in &mut out {
        g.sort_unstable();
    }
    out
}

/// What the threads of one pass share.
struct Shared {
    /// A thread failed (or the driver did): everyone stops.
    abort: AtomicBool,
    /// Threads in the middle of running their tasks.
    busy: AtomicUsize,
    /// Bumped whenever a thread's tasks moved records.
    activity: AtomicU64,
    /// Threads whose tasks all ended the pass.
    finished: AtomicUsize,
    /// The pass is over: threads whose tasks ended stop serving their checkpoints.
    over: AtomicBool,
    driver: Thread,
}

/// Runs one pass with `groups` of `tasks` on their own threads while this thread drives
/// `edges`; returns when every task ended the pass and every edge delivered everything.
#[allow(clippy::too_many_arguments)] // the job's parts, lent for one pass
pub(crate) fn drive(
    tasks: &mut [Box<dyn TaskRun>],
    groups: &[Vec<usize>],
    edges: &mut [Box<dyn EdgeRun>],
    stop: &StopHandle,
    abort: &AbortHandle,
    job_abort: &JobAbort,
    iteration: &[u64],
    control: &mut dyn FnMut() -> Result<bool>,
) -> Result<()> {
    let mut slots: Vec<Option<&mut Box<dyn TaskRun>>> = tasks.iter_mut().map(Some).collect();
    let parts: Vec<Vec<&mut Box<dyn TaskRun>>> =
        groups.iter().map(|g| g.iter().filter_map(|&i| slots[i].take()).collect()).collect();
    let shared = Shared {
        abort: AtomicBool::new(false),
        busy: AtomicUsize::new(0),
        activity: AtomicU64::new(0),
        finished: AtomicUsize::new(0),
        over: AtomicBool::new(false),
        driver: std::thread::current(),
    };
    let n = parts.len();
    std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(k, mut part)| {
                let shared = &shared;
                std::thread::Builder::new()
                    .name(format!("heddle-exec-{k}"))
                    .spawn_scoped(s, move || run_group(&mut part, shared, stop, iteration))
            })
            .collect();
        let threads: Vec<Thread> =
            handles.iter().filter_map(|h| h.as_ref().ok()).map(|h| h.thread().clone()).collect();
        let driven = if threads.len() == n {
            drive_edges(edges, &shared, &threads, n, abort, job_abort, control)
        } else {
            Ok(())
        };
        shared.over.store(true, Ordering::Release);
        threads.iter().for_each(Thread::unpark);
        if driven.is_err() {
            shared.abort.store(true, Ordering::Release);
        }
        let mut first_err = driven.err();
        for h in handles {
            let outcome = match h {
                Ok(h) => h.join().unwrap_or_else(|panic| {
                    shared.abort.store(true, Ordering::Release);
                    std::panic::resume_unwind(panic)
                }),
                Err(e) => {
                    shared.abort.store(true, Ordering::Release);
                    Err(crate::Error::Graph(format!("could not start an executor thread: {e}")))
                }
            };
            if let Err(e) = outcome {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    })
}

/// One executor thread: steps its tasks until they all ended the pass (or someone failed).
fn run_group(
    group: &mut [&mut Box<dyn TaskRun>],
    shared: &Shared,
    stop: &StopHandle,
    iteration: &[u64],
) -> Result<()> {
    let mut idle = 0u32;
    let mut finished_before = false;
    let outcome = loop {
        if shared.abort.load(Ordering::Acquire) {
            break Ok(());
        }
        if stop.requested() {
            for t in group.iter_mut() {
                t.stop();
            }
        }
        let now = Instant::now();
        shared.busy.fetch_add(1, Ordering::AcqRel);
        let stepped = group.iter_mut().try_fold(false, |moved, t| {
            Ok::<_, crate::Error>(t.step(now, iteration)?.moved | moved)
        });
        shared.busy.fetch_sub(1, Ordering::AcqRel);
        match stepped {
            Err(e) => break Err(e),
            Ok(true) => {
                idle = 0;
                shared.activity.fetch_add(1, Ordering::Release);
                shared.driver.unpark();
                continue;
            }
            Ok(false) => {}
        }
        if group.iter().all(|t| t.pass_done()) {
            finished_before = true;
            break serve_checkpoints(group, shared, iteration);
        }
        idle += 1;
        if idle < SPIN_ROUNDS {
            std::hint::spin_loop();
        } else if idle < YIELD_ROUNDS {
            std::thread::yield_now();
        } else {
            let wake = group.iter().filter_map(|t| t.next_wake()).min();
            std::thread::park_timeout(
                wake.map_or(PARK, |w| w.saturating_duration_since(now).min(PARK)),
            );
        }
    };
    if outcome.is_err() {
        shared.abort.store(true, Ordering::Release);
    }
    if !finished_before {
        shared.finished.fetch_add(1, Ordering::AcqRel);
        shared.driver.unpark();
    }
    outcome
}

/// A thread whose tasks all ended the pass: until the pass is over, its tasks still take
/// the checkpoints triggered meanwhile (an ended task snapshots its final state at once),
/// so that their worker can acknowledge them.
fn serve_checkpoints(
    group: &mut [&mut Box<dyn TaskRun>],
    shared: &Shared,
    iteration: &[u64],
) -> Result<()> {
    shared.finished.fetch_add(1, Ordering::AcqRel);
    shared.driver.unpark();
    while !shared.over.load(Ordering::Acquire) && !shared.abort.load(Ordering::Acquire) {
        for t in group.iter_mut() {
            t.checkpoint_ended(iteration)?;
        }
        std::thread::park_timeout(PARK);
    }
    Ok(())
}

/// The driver: moves records through the edges, wakes the executor threads when it
/// delivered something, and waits on the engine (with its liveness checks and timeout)
/// only while every executor thread is idle too.
#[allow(clippy::too_many_arguments)] // as `drive`
fn drive_edges(
    edges: &mut [Box<dyn EdgeRun>],
    shared: &Shared,
    threads: &[Thread],
    n: usize,
    abort: &AbortHandle,
    job_abort: &JobAbort,
    control: &mut dyn FnMut() -> Result<bool>,
) -> Result<()> {
    let mut idle = 0u32;
    let mut seen = shared.activity.load(Ordering::Acquire);
    loop {
        if shared.abort.load(Ordering::Acquire) {
            return Ok(()); // the failing thread reports why
        }
        abort.check()?;
        job_abort.check()?;
        let mut moved = control()?;
        for e in edges.iter_mut() {
            moved |= e.pump()?;
        }
        if moved {
            idle = 0;
            threads.iter().for_each(Thread::unpark);
            continue;
        }
        if shared.finished.load(Ordering::Acquire) == n && edges.iter().all(|e| e.is_done()) {
            return Ok(());
        }
        let activity = shared.activity.load(Ordering::Acquire);
        if activity != seen || shared.busy.load(Ordering::Acquire) > 0 {
            // The tasks are working: they will hand over records soon.
            seen = activity;
            idle += 1;
            if idle < SPIN_ROUNDS {
                std::hint::spin_loop();
            } else if idle < YIELD_ROUNDS {
                std::thread::yield_now();
            } else {
                std::thread::park_timeout(Duration::from_micros(100));
            }
            continue;
        }
        match edges.iter_mut().find(|e| !e.is_done()) {
            Some(edge) => edge.wait()?,
            None => std::thread::park_timeout(PARK),
        }
    }
}

/// How long an executor whose every link rings it sleeps while nothing is due, if no
/// checkpoints are taken: records, aborts, stops and the job's end ring its bell, and what
/// rings none asks for its own wake-up (a source polling a socket or keeping a rate, a
/// timer), so the limit only bounds a sleep nothing will end.
const SLEEP_WOKEN: Duration = Duration::from_secs(1);

/// The same with checkpoints taken: the coordinator's interval and the control edge's own
/// polls ring no bell (the state writer's completions do), and are looked at this often.
const NAP_CHECKPOINTS: Duration = Duration::from_millis(50);

/// Sleeps an executor that found nothing to do for `quiet`: see [`nap`]. `due` is the
/// soonest wake-up its tasks asked for; `checkpoints` whether the job takes them. A stop
/// or abort asked meanwhile ends the sleep.
pub(crate) fn sleep_idle(
    comm: &heddle_comm::Communicator,
    quiet: Duration,
    due: Option<Duration>,
    checkpoints: bool,
    stop: &super::StopHandle,
    abort: &super::AbortHandle,
) {
    let limit = if checkpoints { NAP_CHECKPOINTS } else { SLEEP_WOKEN };
    if let Some(nap) = nap(quiet, comm.sleeps_until_woken().then_some(limit)) {
        comm.park_unless(due.map_or(nap, |d| nap.min(d)), || stop.requested() || abort.requested());
    }
}

/// How long a job that has had nothing to do for `quiet` sleeps between passes: not at
/// all for 200 µs (records may be on their way), then a 64th of the quiet spell, from 50 µs
/// to 2 ms. When peers wake the sleeper as they write (`woken`: its links are rings of this
/// host, and the limit of a sleep), after 50 µs for that limit at once. A streaming worker
/// waiting for input thus wakes when something arrives or is due, not on a schedule of
/// its own.
pub(crate) fn nap(quiet: Duration, woken: Option<Duration>) -> Option<Duration> {
    let nap = match woken {
        Some(limit) => limit,
        None => (quiet / 64).clamp(Duration::from_micros(50), Duration::from_millis(2)),
    };
    // Records may be on their way: spin a while first (briefly when they ring).
    let spin = Duration::from_micros(if woken.is_some() { 50 } else { 200 });
    (quiet >= spin).then_some(nap)
}
