//! An isolated task's process: forked from the worker's executor thread with the task
//! object in it, confined to its control groups, and driven by the worker over two
//! shared-memory rings ([`ForkRings`]: one each way, in a mapping whose file is already
//! removed): each call of the task ([`Compute`]) becomes a request, answered by the
//! records it emitted and a `Done` (or the failure, with its message). Records to execute
//! go in batches: `Execute` requests are queued without an answer, and the `Flush` that
//! ends a batch is answered by everything the batch emitted (the child writes nothing
//! before it, so neither side can block the other).
//!
//! The child is a fork, not a fresh program: it starts with the task as built (no
//! start-up cost beyond copying page tables), and only the forking thread exists in it,
//! so the task must not rely on the worker's other threads. It dies with the worker
//! (`PR_SET_PDEATHSIG`), and ends with `_exit` after the task's `close`.

use std::io::{BufReader, BufWriter, Read, Write};
use std::time::Instant;

use heddle_bridge::{ForkRings, ShmReader, ShmWriter};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::confine::Confinement;
use crate::exec::outputs::Context;
use crate::{Compute, Produced, Strategy, TaskInfo};

/// A call of the task, sent to its process.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    Prepare,
    /// A record, answered at the next `Flush`.
    Execute(Vec<u8>),
    /// Ends a batch of `Execute`s.
    Flush,
    Tick,
    EndOfInput,
    Drain,
    Snapshot(u64),
    Restore(Vec<u8>),
    Committed(u64),
    Close,
}

/// What the process answers: records, a state, then `Done` — or `Failed`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    Out(Vec<u8>),
    State(Option<Vec<u8>>),
    /// The call returned (`more`: a drain that has more to give).
    Done {
        more: bool,
    },
    Failed(String),
}

/// A request with the iteration it belongs to.
#[derive(Debug, Serialize, Deserialize)]
struct Call {
    iteration: Vec<u64>,
    request: Request,
}

fn write_frame<W: Write, T: Serialize>(w: &mut W, value: &T) -> std::io::Result<()> {
    let bytes = bincode::serialize(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::other("a frame over 4 GiB to an isolated task"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&bytes)
}

fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut bytes)?;
    bincode::deserialize(&bytes).map_err(std::io::Error::other)
}

/// The worker's end of a running isolated process.
#[derive(Debug)]
pub(crate) struct Child {
    pub(crate) pid: i32,
    reader: BufReader<ShmReader>,
    writer: BufWriter<ShmWriter>,
    pub(crate) started: Instant,
    /// Time spent moving the process into its groups.
    pub(crate) confined: std::time::Duration,
    /// `Execute`s sent since the last `Flush`, and their bytes.
    queued: (usize, usize),
}

/// Records and bytes of a batch that make the worker flush it at once.
const BATCH: (usize, usize) = (4096, 1 << 20);
/// Bytes of each ring. Their pages count against the process's memory contract (it
/// touches the reply ring first), so they are kept small: a batch larger than a ring
/// goes through as the child reads it.
const RING: usize = 1 << 20;

/// How the process ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// Exit status, or the signal that killed it (negative).
    pub(crate) status: i32,
    pub(crate) cpu_s: f64,
    /// Peak resident set, in bytes (`ru_maxrss`).
    pub(crate) max_rss: u64,
    pub(crate) wall_s: f64,
}

/// Forks the process of `task`, moves it into `confinement`'s groups (else it limits its
/// own data segment to `memory` bytes more than it starts with), and returns the
/// worker's end.
///
/// # Errors
/// Rings that cannot be made, a failed `fork`, or a group the process could not join.
pub(crate) fn spawn<C: Compute>(
    task: C,
    info: &TaskInfo,
    confinement: &Confinement,
    memory: u64,
) -> Result<Child, String>
where
    C::In: DeserializeOwned,
    C::Out: Serialize,
{
    let rings = ForkRings::new(RING).map_err(|e| e.to_string())?;
    let rlimit = (!confinement.limits_memory() && memory > 0).then_some(memory);
    let started = Instant::now();
    // SAFETY: getpid only reads.
    let worker = unsafe { libc::getpid() };
    // The child only runs the task loop below on this thread's copy of the address space
    // and leaves with `_exit`; it takes no lock another thread may hold except the
    // allocator's, which glibc resets at fork (and what the fork hooks hold across it).
    let pid = super::fork_hooks::fork();
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        child_main(task, info.clone(), &rings, rlimit, worker);
    }
    // The worker's copy of the task stays as it is: its drop could undo what the child
    // uses (remove a file, close a connection).
    std::mem::forget(task);
    let (reader, writer) = rings.parent(pid as u32);
    let mut child = Child {
        pid,
        reader: BufReader::with_capacity(64 << 10, reader),
        writer: BufWriter::with_capacity(64 << 10, writer),
        started,
        confined: std::time::Duration::ZERO,
        queued: (0, 0),
    };
    let joining = Instant::now();
    let joined = confinement.add(pid);
    child.confined = joining.elapsed();
    if let Err(e) = joined {
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = child.wait();
        return Err(e);
    }
    Ok(child)
}

impl Child {
    /// Sends `request` and hands each reply to `on_reply` until `Done` (returns its
    /// `more`) or `Failed` (its message). `Err(None)`: the process is gone.
    pub(crate) fn call(
        &mut self,
        iteration: &[u64],
        request: Request,
        on_reply: &mut dyn FnMut(Reply) -> Result<(), String>,
    ) -> Result<bool, Option<String>> {
        self.flush(iteration, on_reply)?;
        self.exchange(iteration, request, on_reply)
    }

    /// Queues record `bytes` for execution, flushing the batch when it is full.
    pub(crate) fn execute(
        &mut self,
        iteration: &[u64],
        bytes: Vec<u8>,
        on_reply: &mut dyn FnMut(Reply) -> Result<(), String>,
    ) -> Result<(), Option<String>> {
        let len = bytes.len();
        let call = Call { iteration: iteration.to_vec(), request: Request::Execute(bytes) };
        write_frame(&mut self.writer, &call).map_err(|_| None)?;
        self.queued = (self.queued.0 + 1, self.queued.1 + len);
        if self.queued.0 >= BATCH.0 || self.queued.1 >= BATCH.1 {
            self.flush(iteration, on_reply)?;
        }
        Ok(())
    }

    /// Ends the batch of queued records: their outputs go to `on_reply`.
    pub(crate) fn flush(
        &mut self,
        iteration: &[u64],
        on_reply: &mut dyn FnMut(Reply) -> Result<(), String>,
    ) -> Result<(), Option<String>> {
        if self.queued.0 == 0 {
            return Ok(());
        }
        self.queued = (0, 0);
        self.exchange(iteration, Request::Flush, on_reply).map(drop)
    }

    fn exchange(
        &mut self,
        iteration: &[u64],
        request: Request,
        on_reply: &mut dyn FnMut(Reply) -> Result<(), String>,
    ) -> Result<bool, Option<String>> {
        let call = Call { iteration: iteration.to_vec(), request };
        write_frame(&mut self.writer, &call)
            .and_then(|()| self.writer.flush())
            .map_err(|_| None)?;
        loop {
            match read_frame::<_, Reply>(&mut self.reader).map_err(|_| None)? {
                Reply::Done { more } => return Ok(more),
                Reply::Failed(message) => return Err(Some(message)),
                other => on_reply(other).map_err(Some)?,
            }
        }
    }

    /// Waits for the process to end (killing it if it does not within 5 s of its ring
    /// closing) and reports how.
    pub(crate) fn wait(self) -> Ended {
        let Child { pid, mut reader, writer, started, .. } = self;
        // Closing the ring to the child tells it to leave (a read there then ends); what
        // it still writes is read and dropped, so that it is not left waiting for room.
        drop(writer.into_parts().0);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        reader.get_ref().deadline(Some(deadline));
        let mut scratch = vec![0u8; 64 << 10];
        while matches!(reader.read(&mut scratch), Ok(n) if n > 0) {}
        let mut status = 0;
        // SAFETY: rusage is plain data filled by the kernel.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waiting for our own child.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid || r < 0 {
                break;
            }
            if Instant::now() >= deadline {
                // SAFETY: our own child, which did not leave.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Ended {
            status: if libc::WIFSIGNALED(status) {
                -libc::WTERMSIG(status)
            } else {
                libc::WEXITSTATUS(status)
            },
            cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
            max_rss: usage.ru_maxrss.max(0) as u64 * 1024,
            wall_s: started.elapsed().as_secs_f64(),
        }
    }
}

/// The child: serves the task's calls until `Close` or the worker goes, then `_exit`.
fn child_main<C: Compute>(
    mut task: C,
    info: TaskInfo,
    rings: &ForkRings,
    rlimit: Option<u64>,
    worker: i32,
) -> !
where
    C::In: DeserializeOwned,
    C::Out: Serialize,
{
    // SAFETY: prctl and setrlimit take plain values; the child dies with its parent.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        if libc::getppid() != worker {
            exit(0); // the worker died before the line above
        }
    }
    if let Some(memory) = rlimit {
        limit_data(memory);
    }
    let (reader, writer) = rings.child(worker as u32);
    let mut reader = BufReader::with_capacity(64 << 10, reader);
    let mut writer = BufWriter::with_capacity(64 << 10, writer);
    let mut strategy = Strategy::default();
    let mut out: Vec<C::Out> = Vec::new();
    // The first failure of the batch under way (its later records are skipped).
    let mut failed: Option<String> = None;
    loop {
        let Ok(call) = read_frame::<_, Call>(&mut reader) else { exit(0) };
        let closing = matches!(call.request, Request::Close);
        let batched = matches!(call.request, Request::Execute(_));
        if batched && failed.is_some() {
            continue;
        }
        let flush = matches!(call.request, Request::Flush);
        let mut state = None;
        let result = if flush {
            Ok(Ok(false))
        } else {
            let mut ctx = Context {
                out: &mut out,
                info: &info,
                comm: None,
                strategy: &mut strategy,
                iteration: &call.iteration,
                // The worker's side wakes it; asked wake-ups stay with this process.
                wake: &mut None,
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                serve(&mut task, &mut ctx, call.request, &mut state)
            }))
        };
        let outcome = match result {
            Ok(Ok(more)) => Ok(more),
            Ok(Err(e)) => Err(e.to_string()),
            Err(panic) => Err(match panic.downcast::<super::CallFailed>() {
                Ok(failed) => failed.0,
                Err(panic) => format!("panicked: {}", panic_text(panic.as_ref())),
            }),
        };
        if batched {
            // Answered at the batch's flush.
            if let Err(e) = outcome {
                failed = Some(e);
            }
            continue;
        }
        let outcome = match failed.take() {
            Some(e) => Err(e),
            None => outcome,
        };
        let mut send = || -> std::io::Result<()> {
            for o in out.drain(..) {
                let bytes = bincode::serialize(&o).map_err(std::io::Error::other)?;
                write_frame(&mut writer, &Reply::Out(bytes))?;
            }
            if let Some(s) = state.take() {
                write_frame(&mut writer, &Reply::State(s))?;
            }
            let reply = match &outcome {
                Ok(more) => Reply::Done { more: *more },
                Err(e) => Reply::Failed(e.clone()),
            };
            write_frame(&mut writer, &reply)?;
            writer.flush()
        };
        if send().is_err() || closing || outcome.is_err() {
            exit(0);
        }
    }
}

/// Runs one call on the task; `Ok(more)` as [`Reply::Done`].
fn serve<C: Compute>(
    task: &mut C,
    ctx: &mut Context<'_, C::Out>,
    request: Request,
    state: &mut Option<Option<Vec<u8>>>,
) -> crate::Result<bool>
where
    C::In: DeserializeOwned,
{
    match request {
        Request::Prepare => task.prepare(ctx)?,
        Request::Execute(bytes) => {
            let input: C::In = bincode::deserialize(&bytes).map_err(|e| crate::Error::Task {
                task: ctx.info().to_string(),
                message: format!("a record did not decode in the isolated process: {e}"),
            })?;
            task.execute(ctx, input)?;
        }
        Request::Tick => task.tick(ctx)?,
        Request::EndOfInput => task.end_of_input(ctx)?,
        Request::Drain => return Ok(task.drain(ctx)? == Produced::More),
        Request::Snapshot(id) => *state = Some(task.snapshot(ctx, id)?),
        Request::Restore(bytes) => task.restore(ctx, &bytes)?,
        Request::Committed(id) => task.committed(ctx, id)?,
        Request::Close => task.close(ctx)?,
        Request::Flush => {}
    }
    Ok(false)
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Limits the data segment to what the process holds now plus `memory` bytes (the
/// fallback without control groups: an allocation past it fails and the process ends).
fn limit_data(memory: u64) {
    let now_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmData:")?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
            })
        })
        .unwrap_or(0);
    let limit = now_kib * 1024 + memory;
    let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
    // SAFETY: a plain struct for the kernel.
    unsafe { libc::setrlimit(libc::RLIMIT_DATA, &rl) };
}

fn exit(code: i32) -> ! {
    super::fork_hooks::before_exit();
    // SAFETY: leaves without running the worker's exit handlers or destructors.
    unsafe { libc::_exit(code) }
}
