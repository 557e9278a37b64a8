//! Exactly once end to end with a Redis source and sink: `examples/exactly_once_redis`
//! counts 20,000 entries of a real `redis-server` per key on 3 workers under `heddle run
//! --restarts 20`, while a random worker is SIGKILLed 10 times at random moments; the
//! output stream must hold every input ID exactly once, and per key the COUNTs 1..n(key)
//! in order, as computed here from the input.
//!
//! The job is paced (`--rate`) so that it cannot finish before the last kill: each attempt
//! is killed at most 0.8 s after its workers appear, so the 10 killed attempts read at
//! most 10 × 0.8 s × 1,500 entries/s = 12,000 of the 20,000 entries (fewer on a slow
//! machine, where they also start later).

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::redis::Redis;
use common::{assert_no_survivors, command, example, marker};

const ENTRIES: u64 = 20_000;
const KILLS: usize = 10;
const RATE: &str = "1500";

/// `heddle run`, killed if the test fails while it runs (its workers die with it).
struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A small deterministic generator (splitmix64): the input and which worker is killed
/// when. Seeded from the clock, or from `EXACTLY_ONCE_REDIS_SEED`; the seed is printed, and
/// named in every failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The input: `(id, key)` in stream order, with unique ids and skewed keys (key `k0` is
/// the most frequent, about a third of the entries; 64 keys in all).
fn input(rng: &mut Rng) -> Vec<(String, String)> {
    (0..ENTRIES)
        .map(|i| {
            let key = (rng.unit().powi(4) * 64.0) as u32;
            (format!("id-{i:05}-{}", rng.next() % 1000), format!("k{key}"))
        })
        .collect()
}

fn load(redis: &Redis, entries: &[(String, String)]) {
    let mut c = redis.conn();
    for batch in entries.chunks(1000) {
        let mut pipe = redis::pipe();
        for (id, key) in batch {
            pipe.cmd("XADD").arg("in").arg("*").arg("id").arg(id).arg("key").arg(key).ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
    }
    let _: String =
        redis::cmd("XADD").arg("in").arg("*").arg("end").arg("1").query(&mut c).unwrap();
}

/// The output stream's `value` fields, in order.
fn output(redis: &Redis) -> Vec<String> {
    let mut c = redis.conn();
    let entries: Vec<(String, Vec<String>)> =
        redis::cmd("XRANGE").arg("out").arg("-").arg("+").query(&mut c).unwrap();
    entries
        .into_iter()
        .map(|(id, fields)| match fields.as_slice() {
            [f, v] if f == "value" => v.clone(),
            _ => panic!("output entry {id} is not one `value` field: {fields:?}"),
        })
        .collect()
}

/// The pids of the job's live workers (children of the launcher running the example).
fn workers(launcher: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...
        let mut rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("").split(' ');
        let (state, ppid) = (rest.next(), rest.next().and_then(|p| p.parse::<u32>().ok()));
        let example = std::fs::read_link(entry.path().join("exe"))
            .is_ok_and(|e| e.ends_with("exactly_once_redis"));
        if ppid == Some(launcher) && state != Some("Z") && example {
            found.push(pid);
        }
    }
    found
}

/// Waits until 3 workers run that are none of `old` (a new attempt); `None` if the
/// launcher exited first.
fn new_attempt(job: &mut Child, old: &HashSet<u32>) -> Option<Vec<u32>> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if job.try_wait().unwrap().is_some() {
            return None;
        }
        let now = workers(job.id());
        if now.len() == 3 && now.iter().all(|p| !old.contains(p)) {
            return Some(now);
        }
        assert!(Instant::now() < until, "no new attempt's 3 workers within 60 s: {now:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn redis_to_redis_is_exactly_once_while_workers_are_killed() {
    let seed = std::env::var("EXACTLY_ONCE_REDIS_SEED").map_or_else(
        |_| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64,
        |s| s.parse().expect("EXACTLY_ONCE_REDIS_SEED is a u64"),
    );
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let redis = Redis::start("exactly-once-redis");
    let entries = input(&mut rng);
    load(&redis, &entries);

    let mark = marker("eo-redis");
    let program = example("exactly_once_redis");
    let (url, ckpt) = (redis.url(), redis.dir.join("checkpoints"));
    let args = [
        "run",
        "-n",
        "3",
        "--restarts",
        "20",
        "--",
        &program,
        "--url",
        &url,
        "--input-key",
        "in",
        "--output-key",
        "out",
        "--checkpoint-ms",
        "100",
        "--checkpoint-dir",
        ckpt.to_str().unwrap(),
        "--rate",
        RATE,
    ];
    let (stdout, stderr) = (redis.dir.join("job.out"), redis.dir.join("job.err"));
    let mut cmd = command(&mark, &args);
    // Files, not pipes: nothing reads them while the job runs.
    cmd.stdout(File::create(&stdout).unwrap()).stderr(File::create(&stderr).unwrap());
    let mut job = Job(cmd.spawn().expect("spawn heddle"));
    let job = &mut job.0;
    let log = |what: &str| {
        let (o, e) = (std::fs::read_to_string(&stdout), std::fs::read_to_string(&stderr));
        format!(
            "{what} (seed {seed})\nstdout:\n{}\nstderr:\n{}",
            o.unwrap_or_default(),
            e.unwrap_or_default()
        )
    };

    let mut seen: HashSet<u32> = HashSet::new();
    for kill in 0..KILLS {
        let Some(pids) = new_attempt(job, &seen) else {
            panic!("{}", log(&format!("the job ended before kill {}", kill + 1)));
        };
        seen.extend(&pids);
        std::thread::sleep(Duration::from_millis(100 + rng.next() % 700));
        let target = pids[(rng.next() % 3) as usize];
        // SAFETY: signalling a worker of this test's job.
        unsafe { libc::kill(target as i32, libc::SIGKILL) };
    }
    let until = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = job.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > until {
            let _ = job.kill();
            let _ = job.wait();
            panic!("{}", log("the job did not finish within 120 s of the last kill"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_no_survivors(&mark);
    assert!(status.success(), "{}", log(&format!("the job failed: {status}")));
    let out = std::fs::read_to_string(&stdout).unwrap();
    let last = format!("\"attempt\":{KILLS}");
    assert_eq!(
        out.lines().filter(|l| l.contains(&last)).count(),
        3,
        "{}",
        log("3 workers of the last attempt")
    );

    // Every input ID exactly once, with its own key.
    let key_of: HashMap<&str, &str> =
        entries.iter().map(|(i, k)| (i.as_str(), k.as_str())).collect();
    let values = output(&redis);
    let mut times: HashMap<&str, usize> = HashMap::new();
    let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for v in &values {
        let parts: Vec<&str> = v.split(' ').collect();
        let [id, key, count] = parts[..] else { panic!("output {v:?} is not `ID KEY COUNT`") };
        assert_eq!(key_of.get(id), Some(&key), "output {v:?}: an unknown ID or another key");
        *times.entry(id).or_default() += 1;
        counts.entry(key.to_string()).or_default().push(count.parse().unwrap());
    }
    let twice: Vec<_> = times.iter().filter(|(_, &n)| n > 1).take(10).collect();
    assert!(twice.is_empty(), "IDs written more than once (seed {seed}): {twice:?}");
    let missing: Vec<_> = key_of.keys().filter(|i| !times.contains_key(*i)).take(10).collect();
    assert!(missing.is_empty(), "IDs never written (seed {seed}): {missing:?}");
    assert_eq!(values.len(), entries.len());

    // Per key the COUNTs 1..n(key), in order, n(key) counted from the input.
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (_, key) in &entries {
        *want.entry(key.clone()).or_default() += 1;
    }
    assert_eq!(counts.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (key, n) in &want {
        let expected: Vec<u64> = (1..=*n).collect();
        assert_eq!(counts[key], expected, "key {key}'s COUNTs (seed {seed})");
    }
    // Each entry's COUNT is its rank among its key's entries in the input.
    let mut running: HashMap<&str, u64> = HashMap::new();
    let expected: HashSet<String> = entries
        .iter()
        .map(|(id, key)| {
            let n = running.entry(key).or_default();
            *n += 1;
            format!("{id} {key} {n}")
        })
        .collect();
    let wrong: Vec<&String> = values.iter().filter(|v| !expected.contains(*v)).take(10).collect();
    assert!(wrong.is_empty(), "COUNTs out of input order (seed {seed}): {wrong:?}");
}
