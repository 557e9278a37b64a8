//! `heddle bench collectives --vs mpi`: Heddle and Open MPI (through mpi4py) on the same
//! collectives, in the same run, printed side by side with the ratio.
//!
//! This module is only the orchestration:
//!
//! * the Heddle side is the example `target/release/examples/bench_collectives` (built with
//!   `cargo build --release --examples`), launched as
//!   `heddle run -n R -- <example> --sizes … --collectives … [--quick]`;
//! * the MPI side is `benches/mpi/bench_collectives.py`, launched with `mpirun` from the
//!   virtualenv that `benches/mpi/setup.sh` creates (and prints on its last line).
//!
//! Both print one JSON object per line per measurement (the semantics, timing rules and format
//! are specified in the docstring of `benches/mpi/bench_collectives.py`):
//!
//! ```text
//! {"system": "mpi", "collective": "allreduce", "ranks": 2, "bytes": 8, "p50_us": 0.957, "p99_us": 1.513, "iters": 2000, "verified": true}
//! ```
//!
//! Bandwidth lines add `"gbps"`. `heddle run` prefixes worker output with `[N] `; that prefix is
//! stripped, and lines that are not such JSON objects are passed through to stderr.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Collectives in table order (also the default `--collectives`).
const COLLECTIVES: &[&str] = &[
    "allreduce",
    "broadcast",
    "allgather",
    "alltoall",
    "pingpong",
    "bandwidth",
];

/// Default message sizes in bytes (8 B, 1 KiB, 64 KiB, 1 MiB, 16 MiB).
const DEFAULT_SIZES: &str = "8,1024,65536,1048576,16777216";

/// Where the MPI peer lives, relative to the repository root.
const MPI_SETUP: &str = "benches/mpi/setup.sh";
const MPI_SCRIPT: &str = "benches/mpi/bench_collectives.py";

/// Name of the cargo example that is the Heddle side.
const HEDDLE_EXAMPLE: &str = "bench_collectives";

/// Extra `mpirun` flags, always passed (measured on the 2-core dev VM with Open MPI 4.1.4 from
/// Debian; see `benches/mpi/README.md` for the numbers).
///
/// * `--mca pml ob1 --mca btl self,vader`: the shared-memory transport. Open MPI picks it
///   anyway on one host (UCX/OFI find no hardware here); forcing it skips probing the TCP,
///   openib and OFI components and makes the choice explicit.
/// * `--mca btl_vader_single_copy_mechanism none`: copy-in/copy-out through the shared
///   segment instead of the default CMA single copy (`process_vm_readv`). CMA works in this
///   container, but is slower here: with it, allreduce/broadcast/allgather/alltoall at 64 KiB
///   take 1.9-2.7x longer, allreduce 1 MiB 108 vs 72 µs, broadcast 1 MiB 69 vs 22 µs and
///   16 MiB point-to-point runs at 22 instead of 31 GB/s; only alltoall 1 MiB at 2 ranks is
///   better with CMA (47 vs 67 µs). So this is Open MPI's fastest configuration on this machine.
/// * `--bind-to none`: Open MPI binds each rank to a core by default when ranks <= cores;
///   Heddle workers are not pinned, and on a shared 2-core VM pinning gives no faster medians
///   but much worse tails whenever another process wants a core the rank is pinned to.
///
/// `--oversubscribe` is added only when there are more ranks than cores (Open MPI then also
/// yields the CPU while it polls).
const MPIRUN_FLAGS: &[&str] = &[
    "--bind-to",
    "none",
    "--mca",
    "pml",
    "ob1",
    "--mca",
    "btl",
    "self,vader",
    "--mca",
    "btl_vader_single_copy_mechanism",
    "none",
];

/// How long to wait for the processes that a run leaves holding its stdout after it exits.
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long a timed-out run gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Transport forced on the Heddle side through `HEDDLE_TRANSPORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// Let Heddle choose per peer pair (shared memory on one host).
    Auto,
    /// Shared memory rings.
    Shm,
    /// TCP sockets.
    Tcp,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::Shm => "shm",
            Transport::Tcp => "tcp",
        }
    }
}

/// `heddle bench collectives`: Heddle vs a peer system on the same collectives.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BenchCollectivesArgs {
    /// Peer system to compare against (`mpi` = Open MPI through mpi4py; the only one for now).
    #[arg(long = "vs", value_name = "PEER", default_value = "mpi", value_parser = ["mpi"])]
    pub(crate) vs: String,

    /// Also write every measurement (one record per collective, ranks, bytes and system) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,

    /// World sizes to run, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "2,4"
    )]
    pub(crate) ranks: Vec<usize>,

    /// Message sizes in bytes, comma-separated (pingpong is always 8 B, bandwidth 16 MiB).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = DEFAULT_SIZES)]
    pub(crate) sizes: Vec<u64>,

    /// Collectives to run, comma-separated
    /// (allreduce,broadcast,allgather,alltoall,pingpong,bandwidth).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "allreduce,broadcast,allgather,alltoall,pingpong,bandwidth"
    )]
    pub(crate) collectives: Vec<String>,

    /// Ten times fewer iterations: a smoke test, not a measurement.
    #[arg(long)]
    pub(crate) quick: bool,

    /// Heddle transport, passed as HEDDLE_TRANSPORT [default: auto, i.e. not set].
    #[arg(long, value_enum, value_name = "TRANSPORT")]
    pub(crate) transport: Option<Transport>,

    /// Time limit of each run (one system at one world size), in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    pub(crate) timeout: u64,

    /// Run each side N times, alternating Heddle and MPI, and keep for every measurement the
    /// run with the median p50 (the dev VM drifts between a fast and a slow state, by up to 2x,
    /// over tens of seconds; alternating repeats keep one system from getting only one state).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) repeat: usize,
}

/// One measurement line printed by either side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// `heddle` or `mpi`.
    pub(crate) system: String,
    /// One of [`COLLECTIVES`].
    pub(crate) collective: String,
    /// World size.
    pub(crate) ranks: usize,
    /// Message size in bytes (per rank; per peer for alltoall).
    pub(crate) bytes: u64,
    /// Median time of one operation, µs (per message for bandwidth, one way for pingpong).
    pub(crate) p50_us: f64,
    /// 99th percentile, µs.
    pub(crate) p99_us: f64,
    /// Timed iterations.
    pub(crate) iters: u64,
    /// Whether the result of the operation was checked and right.
    pub(crate) verified: bool,
    /// Bandwidth only: 10^9 bytes per second at the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gbps: Option<f64>,
}

/// What `--json FILE` receives.
#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    benchmark: &'static str,
    vs: &'a str,
    transport: &'static str,
    quick: bool,
    repeat: usize,
    ranks: &'a [usize],
    sizes: &'a [u64],
    collectives: &'a [String],
    mpirun_flags: &'static [&'static str],
    records: &'a [Record],
    failures: &'a [String],
}

type BoxError = Box<dyn std::error::Error>;

/// Runs the comparison. Returns the process exit code: 0 when every run succeeded and every
/// measurement was verified, 1 otherwise (the table is printed either way). Problems that stop
/// it before measuring anything (no repository, no example binary, setup failure) are errors.
pub(crate) fn bench_collectives(args: &BenchCollectivesArgs) -> Result<i32, BoxError> {
    if args.vs != "mpi" {
        return Err(format!("--vs {}: unsupported peer (supported: mpi)", args.vs).into());
    }
    if args.ranks.is_empty() || args.ranks.contains(&0) {
        return Err("--ranks needs a list of world sizes >= 1, e.g. 2,4".into());
    }
    if args.sizes.is_empty() {
        return Err("--sizes needs at least one size in bytes".into());
    }
    if let Some(bad) = args
        .collectives
        .iter()
        .find(|c| !COLLECTIVES.contains(&c.as_str()))
    {
        return Err(format!(
            "--collectives: unknown collective {bad:?} (known: {})",
            COLLECTIVES.join(",")
        )
        .into());
    }

    let root = find_repo_root()?;
    let example = find_heddle_example(&root)?;
    let heddle_exe = std::env::current_exe()?;
    let timeout = Duration::from_secs(args.timeout.max(1));

    eprintln!("bench: setting up the MPI peer ({MPI_SETUP})");
    let python = run_setup(&root, timeout)?;

    let sizes = join(&args.sizes);
    let collectives = args.collectives.join(",");
    let mut bench_args = vec![
        "--sizes".to_string(),
        sizes,
        "--collectives".to_string(),
        collectives,
    ];
    if args.quick {
        bench_args.push("--quick".to_string());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let mut records: Vec<Record> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let repeat = args.repeat.max(1);
    for (n, rep) in args
        .ranks
        .iter()
        .flat_map(|&n| (1..=repeat).map(move |rep| (n, rep)))
    {
        let run = if repeat > 1 {
            format!(", run {rep}/{repeat}")
        } else {
            String::new()
        };
        // Heddle side.
        let mut cmd = Command::new(&heddle_exe);
        cmd.arg("run")
            .arg("-n")
            .arg(n.to_string())
            .arg("--")
            .arg(&example)
            .args(&bench_args);
        cmd.current_dir(&root);
        if let Some(t) = args.transport {
            cmd.env("HEDDLE_TRANSPORT", t.as_str());
        }
        run_side(
            &format!("heddle, {n} ranks{run}"),
            &mut cmd,
            timeout,
            &mut records,
            &mut failures,
        );

        // MPI side.
        let mut cmd = Command::new("mpirun");
        cmd.args(mpirun_args(n, cores))
            .arg(&python)
            .arg(root.join(MPI_SCRIPT))
            .args(&bench_args);
        cmd.current_dir(&root)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        run_side(
            &format!("mpi, {n} ranks{run}"),
            &mut cmd,
            timeout,
            &mut records,
            &mut failures,
        );
    }

    let mut records = median_runs(records);
    sort_records(&mut records);
    println!("{}", render_table(&records, "mpi"));
    if !failures.is_empty() {
        println!("\nFAILED runs (their rows are shown as \"-\"):");
        for f in &failures {
            println!("* {f}");
        }
    }

    if let Some(path) = &args.json {
        let report = JsonReport {
            benchmark: "collectives",
            vs: &args.vs,
            transport: args.transport.unwrap_or(Transport::Auto).as_str(),
            quick: args.quick,
            repeat: args.repeat.max(1),
            ranks: &args.ranks,
            sizes: &args.sizes,
            collectives: &args.collectives,
            mpirun_flags: MPIRUN_FLAGS,
            records: &records,
            failures: &failures,
        };
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }

    let unverified = records.iter().filter(|r| !r.verified).count();
    if unverified > 0 {
        eprintln!("bench: {unverified} measurement(s) were NOT verified (wrong results)");
    }
    Ok(if failures.is_empty() && unverified == 0 {
        0
    } else {
        1
    })
}

/// The `mpirun` arguments before the program, for `n` ranks on a machine with `cores` cores.
fn mpirun_args(n: usize, cores: usize) -> Vec<String> {
    let mut v = vec!["-n".to_string(), n.to_string()];
    if n > cores {
        v.push("--oversubscribe".to_string());
    }
    v.extend(MPIRUN_FLAGS.iter().map(|s| (*s).to_string()));
    v
}

/// Runs one side, collecting its records; a failure is recorded, not fatal.
fn run_side(
    label: &str,
    cmd: &mut Command,
    timeout: Duration,
    records: &mut Vec<Record>,
    failures: &mut Vec<String>,
) {
    eprintln!("bench: [{label}] {}", describe(cmd));
    let start = Instant::now();
    match run_captured(cmd, timeout, true) {
        Ok(out) => {
            let got: Vec<Record> = out.lines.iter().filter_map(|l| parse_line(l)).collect();
            eprintln!(
                "bench: [{label}] {} measurement(s) in {:.1} s",
                got.len(),
                start.elapsed().as_secs_f64()
            );
            if out.timed_out {
                failures.push(format!(
                    "{label}: timed out after {} s (killed)",
                    timeout.as_secs()
                ));
            } else if !out.status.success() {
                failures.push(format!("{label}: exited with {}", out.status));
            } else if got.is_empty() {
                failures.push(format!("{label}: printed no measurement"));
            }
            records.extend(got);
        }
        Err(e) => failures.push(format!("{label}: cannot start {}: {e}", describe(cmd))),
    }
}

/// Finds the repository: the first ancestor of the current directory, then of the current
/// executable, that contains `benches/mpi/setup.sh`.
fn find_repo_root() -> Result<PathBuf, BoxError> {
    let mut starts = Vec::new();
    if let Ok(dir) = std::env::current_dir() {
        starts.push(dir);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    for start in &starts {
        for dir in start.ancestors() {
            if dir.join(MPI_SETUP).is_file() {
                return Ok(dir.to_path_buf());
            }
        }
    }
    Err(format!(
        "cannot find the Heddle repository (a directory with {MPI_SETUP}) above {}: \
         run this from inside the repository",
        starts
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    )
    .into())
}

/// `<target>/release/examples/bench_collectives`, where `<target>` is `$CARGO_TARGET_DIR` or
/// `<repo>/target`.
fn find_heddle_example(root: &Path) -> Result<PathBuf, BoxError> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    };
    let exe = target.join("release").join("examples").join(HEDDLE_EXAMPLE);
    if exe.is_file() {
        Ok(exe)
    } else {
        Err(format!(
            "the Heddle side of the benchmark is missing: {} does not exist.\n\
             Build it first with: cargo build --release --examples",
            exe.display()
        )
        .into())
    }
}

/// Runs `benches/mpi/setup.sh` and returns the venv python it prints on its last line.
fn run_setup(root: &Path, timeout: Duration) -> Result<PathBuf, BoxError> {
    let setup = root.join(MPI_SETUP);
    let mut cmd = Command::new("bash");
    cmd.arg(&setup).current_dir(root);
    let out = run_captured(&mut cmd, timeout, false)
        .map_err(|e| format!("cannot run {}: {e}", setup.display()))?;
    if out.timed_out || !out.status.success() {
        return Err(format!(
            "{} failed ({}); see its messages above",
            setup.display(),
            if out.timed_out {
                "timed out".to_string()
            } else {
                out.status.to_string()
            }
        )
        .into());
    }
    let python = out
        .lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| format!("{} printed no python path", setup.display()))?;
    if !python.is_file() {
        return Err(format!(
            "{} printed {}, which is not a file",
            setup.display(),
            python.display()
        )
        .into());
    }
    Ok(python)
}

/// Output of [`run_captured`].
#[derive(Debug)]
struct Captured {
    status: ExitStatus,
    lines: Vec<String>,
    timed_out: bool,
}

/// Runs `cmd` with stdout captured line by line (stderr inherited, stdin closed), killing it
/// (SIGTERM, then SIGKILL) after `timeout`. With `echo`, stdout lines that are not measurement
/// records are copied to stderr as they come.
fn run_captured(cmd: &mut Command, timeout: Duration, echo: bool) -> std::io::Result<Captured> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if echo && parse_line(&line).is_none() {
                eprintln!("{line}");
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let start = Instant::now();
    let mut lines = Vec::new();
    let mut timed_out = false;
    let status = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Timeout | mpsc::RecvTimeoutError::Disconnected) => {}
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            break terminate(&mut child)?;
        }
    };
    // The output may still be in the pipe; stop waiting if a stray grandchild keeps it open.
    let deadline = Instant::now() + DRAIN_GRACE;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    Ok(Captured {
        status,
        lines,
        timed_out,
    })
}

/// SIGTERM (so that `heddle run` and `mpirun` stop their workers), then SIGKILL after a grace.
fn terminate(child: &mut std::process::Child) -> std::io::Result<ExitStatus> {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: plain kill(2) on our own child, which has not been reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    child.wait()
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Removes a leading `[N] ` (the rank prefix of `heddle run`), if any.
fn strip_rank_prefix(line: &str) -> &str {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let inner = &rest[..end];
            if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
                return rest[end + 1..].trim_start();
            }
        }
    }
    t
}

/// Parses one output line into a record; `None` for anything that is not one.
pub(crate) fn parse_line(line: &str) -> Option<Record> {
    let body = strip_rank_prefix(line).trim_end();
    if !body.starts_with('{') {
        return None;
    }
    serde_json::from_str(body).ok()
}

fn collective_order(c: &str) -> usize {
    COLLECTIVES
        .iter()
        .position(|k| *k == c)
        .unwrap_or(COLLECTIVES.len())
}

/// Sorts records by collective (table order), ranks, bytes, system.
fn sort_records(records: &mut [Record]) {
    records.sort_by(|a, b| {
        (
            collective_order(&a.collective),
            &a.collective,
            a.ranks,
            a.bytes,
            &a.system,
        )
            .cmp(&(
                collective_order(&b.collective),
                &b.collective,
                b.ranks,
                b.bytes,
                &b.system,
            ))
    });
}

/// Keeps one record per (system, collective, ranks, bytes): the one with the median p50 (the
/// lower median for an even count), with `verified` true only if every run verified.
pub(crate) fn median_runs(records: Vec<Record>) -> Vec<Record> {
    let mut groups: BTreeMap<(String, String, usize, u64), Vec<Record>> = BTreeMap::new();
    for r in records {
        let key = (r.system.clone(), r.collective.clone(), r.ranks, r.bytes);
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_values()
        .map(|mut runs| {
            let verified = runs.iter().all(|r| r.verified);
            runs.sort_by(|a, b| a.p50_us.total_cmp(&b.p50_us));
            let mut chosen = runs.swap_remove((runs.len() - 1) / 2);
            chosen.verified = verified;
            chosen
        })
        .collect()
}

/// One table row: the Heddle and the peer measurement of a (collective, ranks, bytes).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) collective: String,
    pub(crate) ranks: usize,
    pub(crate) bytes: u64,
    pub(crate) heddle: Option<Record>,
    pub(crate) peer: Option<Record>,
}

/// Pairs Heddle records with the `peer` system's, in table order. A later record for the same
/// key and system replaces an earlier one; systems other than these two are ignored.
pub(crate) fn merge(records: &[Record], peer: &str) -> Vec<Row> {
    let mut rows: BTreeMap<(usize, String, usize, u64), Row> = BTreeMap::new();
    for r in records {
        let is_heddle = r.system == "heddle";
        if !is_heddle && r.system != peer {
            continue;
        }
        let key = (
            collective_order(&r.collective),
            r.collective.clone(),
            r.ranks,
            r.bytes,
        );
        let row = rows.entry(key).or_insert_with(|| Row {
            collective: r.collective.clone(),
            ranks: r.ranks,
            bytes: r.bytes,
            ..Row::default()
        });
        if is_heddle {
            row.heddle = Some(r.clone());
        } else {
            row.peer = Some(r.clone());
        }
    }
    rows.into_values().collect()
}

/// `a / b` when both exist and `b > 0`.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

/// GB/s (10^9 B/s) of moving `bytes` in `us` microseconds.
fn gbps(bytes: u64, us: f64) -> Option<f64> {
    (us > 0.0).then(|| bytes as f64 / (us * 1e3))
}

fn fmt_us(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v < 10.0 => format!("{v:.2}"),
        Some(v) if v < 1000.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
    }
}

fn fmt_fixed(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

fn fmt_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if b >= unit && b % unit == 0 {
            return format!("{} {name}", b / unit);
        }
    }
    format!("{b} B")
}

fn fmt_verified(h: Option<&Record>, p: Option<&Record>, peer: &str) -> String {
    let one = |r: Option<&Record>| match r.map(|r| r.verified) {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    };
    match (h.map(|r| r.verified), p.map(|r| r.verified)) {
        (Some(true), Some(true)) => "yes".to_string(),
        _ => format!("heddle {} / {peer} {}", one(h), one(p)),
    }
}

fn peer_title(peer: &str) -> String {
    match peer {
        "mpi" => "MPI".to_string(),
        other => other.to_string(),
    }
}

/// The markdown table: latency rows in µs, bandwidth rows in GB/s; missing values are "-".
pub(crate) fn render_table(records: &[Record], peer: &str) -> String {
    let p = peer_title(peer);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| collective | ranks | bytes | Heddle p50 µs | {p} p50 µs | ratio (heddle/{peer}) \
         | Heddle p99 | {p} p99 | verified |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in merge(records, peer) {
        let h = row.heddle.as_ref();
        let m = row.peer.as_ref();
        let (name, h50, m50, h99, m99, r) = if row.collective == "bandwidth" {
            // Throughput: GB/s at the median and at the p99 time; ratio > 1 = Heddle faster.
            let g = |rec: Option<&Record>, q99: bool| {
                rec.and_then(|r| {
                    if q99 {
                        gbps(r.bytes, r.p99_us)
                    } else {
                        r.gbps.or_else(|| gbps(r.bytes, r.p50_us))
                    }
                })
            };
            let (h50, m50) = (g(h, false), g(m, false));
            (
                "bandwidth (GB/s)".to_string(),
                fmt_fixed(h50, 2),
                fmt_fixed(m50, 2),
                fmt_fixed(g(h, true), 2),
                fmt_fixed(g(m, true), 2),
                ratio(h50, m50),
            )
        } else {
            let (h50, m50) = (h.map(|r| r.p50_us), m.map(|r| r.p50_us));
            (
                row.collective.clone(),
                fmt_us(h50),
                fmt_us(m50),
                fmt_us(h.map(|r| r.p99_us)),
                fmt_us(m.map(|r| r.p99_us)),
                ratio(h50, m50),
            )
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {h50} | {m50} | {} | {h99} | {m99} | {} |",
            row.ranks,
            fmt_bytes(row.bytes),
            fmt_fixed(r, 2),
            fmt_verified(h, m, peer),
        );
    }
    let _ = write!(
        out,
        "\nratio = Heddle / {p}: below 1 Heddle is faster on latency rows (µs); on the bandwidth \
         row (GB/s, rank 0 -> rank 1) above 1 Heddle is faster. pingpong is one-way latency \
         (half a round trip)."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(system: &str, collective: &str, ranks: usize, bytes: u64, p50: f64) -> Record {
        Record {
            system: system.to_string(),
            collective: collective.to_string(),
            ranks,
            bytes,
            p50_us: p50,
            p99_us: p50 * 2.0,
            iters: 100,
            verified: true,
            gbps: None,
        }
    }

    const LINE: &str = r#"{"system": "heddle", "collective": "allreduce", "ranks": 2, "bytes": 8, "p50_us": 1.0, "p99_us": 1.5, "iters": 1000, "verified": true}"#;

    #[test]
    fn parses_plain_and_prefixed_lines() {
        let plain = parse_line(LINE).expect("plain line");
        assert_eq!(plain.system, "heddle");
        assert_eq!(plain.collective, "allreduce");
        assert_eq!((plain.ranks, plain.bytes, plain.iters), (2, 8, 1000));
        assert_eq!((plain.p50_us, plain.p99_us), (1.0, 1.5));
        assert!(plain.verified);
        assert_eq!(plain.gbps, None);
        assert_eq!(parse_line(&format!("[0] {LINE}")), Some(plain.clone()));
        assert_eq!(
            parse_line(&format!("[12]   {LINE}  \r")),
            Some(plain.clone())
        );
        assert_eq!(parse_line(&format!("[3]{LINE}")), Some(plain));
    }

    #[test]
    fn parses_bandwidth_gbps() {
        let line = r#"[0] {"system": "mpi", "collective": "bandwidth", "ranks": 2, "bytes": 16777216, "p50_us": 1375.0, "p99_us": 1500.0, "iters": 20, "verified": true, "gbps": 12.2}"#;
        let r = parse_line(line).expect("bandwidth line");
        assert_eq!(r.gbps, Some(12.2));
        assert_eq!(r.bytes, 16 << 20);
    }

    #[test]
    fn ignores_non_records() {
        assert_eq!(parse_line(""), None);
        assert_eq!(parse_line("[0] worker 0 ready"), None);
        assert_eq!(parse_line("[x] {\"a\": 1}"), None);
        assert_eq!(parse_line("{\"system\": \"mpi\"}"), None, "missing fields");
        assert_eq!(parse_line("{not json"), None);
        assert_eq!(parse_line("[abc] {}"), None);
        // A non-numeric bracket is not a rank prefix, so the line does not start with '{'.
        assert_eq!(parse_line(&format!("[a] {LINE}")), None);
    }

    #[test]
    fn ratio_rules() {
        assert_eq!(ratio(Some(3.0), Some(1.5)), Some(2.0));
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(Some(f64::NAN), Some(1.0)), None);
    }

    #[test]
    fn merge_pairs_and_orders() {
        let records = vec![
            rec("mpi", "broadcast", 2, 8, 0.5),
            rec("heddle", "allreduce", 4, 8, 2.0),
            rec("mpi", "allreduce", 2, 1024, 1.0),
            rec("heddle", "allreduce", 2, 8, 1.0),
            rec("mpi", "allreduce", 2, 8, 0.9),
            rec("mpi", "allreduce", 2, 8, 0.8), // a later duplicate wins
            rec("spark", "allreduce", 2, 8, 9.0), // neither system: ignored
        ];
        let rows = merge(&records, "mpi");
        let keys: Vec<_> = rows
            .iter()
            .map(|r| (r.collective.as_str(), r.ranks, r.bytes))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("allreduce", 2, 8),
                ("allreduce", 2, 1024),
                ("allreduce", 4, 8),
                ("broadcast", 2, 8)
            ]
        );
        assert_eq!(rows[0].heddle.as_ref().map(|r| r.p50_us), Some(1.0));
        assert_eq!(rows[0].peer.as_ref().map(|r| r.p50_us), Some(0.8));
        assert!(rows[1].heddle.is_none());
        assert!(rows[2].peer.is_none());
    }

    #[test]
    fn table_shows_ratio_and_dashes() {
        let records = vec![
            rec("heddle", "allreduce", 2, 8, 1.5),
            rec("mpi", "allreduce", 2, 8, 1.0),
            rec("mpi", "alltoall", 4, 1 << 20, 160.0),
        ];
        let table = render_table(&records, "mpi");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("| collective | ranks | bytes | Heddle p50 µs | MPI p50 µs"));
        assert_eq!(
            lines[2],
            "| allreduce | 2 | 8 B | 1.50 | 1.00 | 1.50 | 3.00 | 2.00 | yes |"
        );
        assert_eq!(
            lines[3],
            "| alltoall | 4 | 1 MiB | - | 160.0 | - | - | 320.0 | heddle - / mpi yes |"
        );
    }

    #[test]
    fn table_bandwidth_in_gbps_and_unverified() {
        let mut h = rec("heddle", "bandwidth", 2, 16 << 20, 2000.0);
        h.gbps = Some(8.389);
        h.verified = false;
        let mut m = rec("mpi", "bandwidth", 2, 16 << 20, 1000.0);
        m.gbps = None; // computed from p50 when absent
        let table = render_table(&[h, m], "mpi");
        let row = table.lines().nth(2).expect("row");
        // MPI: 16777216 B / 1000 µs = 16.78 GB/s; p99 = 2000 µs -> 8.39 GB/s.
        assert_eq!(
            row,
            "| bandwidth (GB/s) | 2 | 16 MiB | 8.39 | 16.78 | 0.50 | 4.19 | 8.39 | heddle NO / mpi yes |"
        );
    }

    #[test]
    fn median_of_repeats() {
        let mut bad = rec("mpi", "allreduce", 2, 8, 0.7);
        bad.verified = false;
        let runs = vec![
            rec("mpi", "allreduce", 2, 8, 1.0),
            bad,
            rec("mpi", "allreduce", 2, 8, 0.9),
            rec("heddle", "allreduce", 2, 8, 3.0),
            rec("heddle", "allreduce", 2, 8, 2.0),
        ];
        let mut out = median_runs(runs);
        sort_records(&mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].system.as_str(), out[0].p50_us), ("heddle", 2.0));
        assert!(out[0].verified);
        assert_eq!((out[1].system.as_str(), out[1].p50_us), ("mpi", 0.9));
        assert!(
            !out[1].verified,
            "one unverified run taints the measurement"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(8), "8 B");
        assert_eq!(fmt_bytes(1024), "1 KiB");
        assert_eq!(fmt_bytes(65536), "64 KiB");
        assert_eq!(fmt_bytes(1000), "1000 B");
        assert_eq!(fmt_bytes(16 << 20), "16 MiB");
        assert_eq!(fmt_us(Some(0.957)), "0.96");
        assert_eq!(fmt_us(Some(18.64)), "18.6");
        assert_eq!(fmt_us(Some(3015.4)), "3015");
        assert_eq!(fmt_us(None), "-");
    }

    #[test]
    fn mpirun_oversubscribes_only_beyond_cores() {
        let two = mpirun_args(2, 2);
        assert_eq!(&two[..2], &["-n", "2"]);
        assert!(!two.iter().any(|a| a == "--oversubscribe"));
        assert!(mpirun_args(4, 2).iter().any(|a| a == "--oversubscribe"));
    }

    #[test]
    fn cli_defaults_and_vs_check() {
        use clap::Parser;
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchCollectivesArgs,
        }
        let cli = Cli::try_parse_from(["x", "--vs", "mpi"]).expect("parses");
        assert_eq!(cli.args.ranks, vec![2, 4]);
        assert_eq!(cli.args.sizes, vec![8, 1024, 65536, 1048576, 16777216]);
        assert_eq!(cli.args.collectives.len(), COLLECTIVES.len());
        assert_eq!(cli.args.transport, None);
        assert_eq!(cli.args.repeat, 1);
        assert!(!cli.args.quick);
        let cli = Cli::try_parse_from([
            "x",
            "--vs",
            "mpi",
            "--ranks",
            "3",
            "--sizes",
            "8,64",
            "--transport",
            "tcp",
            "--quick",
            "--json",
            "out.json",
        ])
        .expect("parses");
        assert_eq!(cli.args.ranks, vec![3]);
        assert_eq!(cli.args.sizes, vec![8, 64]);
        assert_eq!(cli.args.transport, Some(Transport::Tcp));
        assert_eq!(cli.args.json, Some(PathBuf::from("out.json")));
        let err = Cli::try_parse_from(["x", "--vs", "spark"]).expect_err("only mpi");
        assert!(err.to_string().contains("mpi"), "{err}");
    }
}
