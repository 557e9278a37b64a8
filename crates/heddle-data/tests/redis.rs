//! Redis Streams in and out, against a real `redis-server` (Debian's package; `make test`
//! installs it when missing) started here on a free port.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use heddle_comm::{local_world, CommConfig};
use heddle_data::Session;

/// A redis-server on a free port, stopped when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A redis-server of this test's own. Tests run in parallel and two may be handed the same
/// free port: a server that could not bind it exits, and is started again on another.
fn start_redis() -> Server {
    for _ in 0..20 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server is not installed: run `apt-get install -y redis-server` \
                 (make test does this)",
            );
        let mut server = Server { child, url: format!("redis://127.0.0.1:{port}/") };
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if server.child.try_wait().ok().flatten().is_some() {
                break; // the port was taken
            }
            if let Some(pid) = listening_pid(&server.url) {
                // Listening: ours, or another test's that took the port first.
                if pid == server.child.id() {
                    return server;
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("redis-server did not start on any of 20 ports");
}

/// The process id of the redis-server answering at `url`, once one answers.
fn listening_pid(url: &str) -> Option<u32> {
    let mut c = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).ok()?;
    info.lines().find_map(|l| l.strip_prefix("process_id:")?.trim().parse().ok())
}

fn redis_cli(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

#[test]
fn entries_flow_from_one_redis_stream_through_a_window_into_another() {
    let server = start_redis();
    let url = server.url.clone();
    // 300 entries, then an end marker.
    let mut c = redis_cli(&url);
    for i in 0..300 {
        let _: String = redis::cmd("XADD")
            .arg("events")
            .arg("*")
            .arg("word")
            .arg(format!("w{}", i % 4))
            .query(&mut c)
            .unwrap();
    }
    let _: String =
        redis::cmd("XADD").arg("events").arg("*").arg("__end__").arg("1").query(&mut c).unwrap();
    let config = CommConfig { timeout: Duration::from_secs(20), ..CommConfig::default() };
    let comms = local_world(2, config).unwrap();
    std::thread::scope(|s| {
        for comm in comms {
            let url = url.clone();
            s.spawn(move || {
                let session = Session::new(comm).unwrap();
                session
                    .redis_stream(&url, "events", "0", Some("__end__"), None)
                    .map(|e| (e.fields[0].1.clone(), 1u64))
                    .window(heddle_data::Window::tumbling_count(25), |_| 0, |a, b| a + b)
                    .map(|w| format!("{} {}", w.key, w.value))
                    .write_redis(&url, "counts", None)
                    .unwrap();
            });
        }
    });
    let out: Vec<(String, Vec<(String, String)>)> = {
        let reply: redis::streams::StreamRangeReply =
            redis::cmd("XRANGE").arg("counts").arg("-").arg("+").query(&mut c).unwrap();
        reply
            .ids
            .into_iter()
            .map(|e| {
                (
                    e.id,
                    e.map
                        .into_iter()
                        .map(|(k, v)| (k, redis::from_redis_value(&v).unwrap()))
                        .collect(),
                )
            })
            .collect()
    };
    // Each word appears 75 times: 3 windows of 25 per word, 12 in all.
    assert_eq!(out.len(), 12);
    let mut lines: Vec<String> = out.into_iter().map(|(_, f)| f[0].1.clone()).collect();
    lines.sort();
    let mut want: Vec<String> =
        (0..4).flat_map(|w| std::iter::repeat_n(format!("w{w} 25"), 3)).collect();
    want.sort();
    assert_eq!(lines, want);
}

/// The `value` fields of the entries of stream `key`, in order.
fn values(url: &str, key: &str) -> Vec<String> {
    let entries: Vec<(String, Vec<String>)> =
        redis::cmd("XRANGE").arg(key).arg("-").arg("+").query(&mut redis_cli(url)).unwrap();
    entries.into_iter().map(|(_, f)| f[1].clone()).collect()
}

/// A session of one worker checkpointing every 20 ms into `dir`.
fn checkpointed(dir: &std::path::Path) -> Session {
    let session = Session::new(heddle_comm::solo(CommConfig::default()).unwrap()).unwrap();
    session.with_checkpoints(dir, Some(Duration::from_millis(20)), "redis-copy").unwrap()
}

#[test]
fn a_stopped_checkpointed_copy_resumes_and_writes_every_entry_once() {
    let server = start_redis();
    let url = server.url.clone();
    let mut c = redis_cli(&url);
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("XADD").arg("in").arg("*").arg("n").arg(i).ignore();
    }
    pipe.cmd("XADD").arg("in").arg("*").arg("end").arg("1").ignore();
    pipe.query::<()>(&mut c).unwrap();
    let dir = std::env::temp_dir().join(format!("heddle-redis-copy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let copy = |session: Session, stop: Option<heddle_task::StopHandle>| {
        let seen = std::sync::atomic::AtomicU64::new(0);
        let st = stop.clone();
        session
            .redis_stream(&url, "in", "0", Some("end"), Some(6000.0))
            .map(move |e| {
                let n = seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if let Some(st) = st.as_ref().filter(|_| n == 1000) {
                    st.stop();
                }
                e.fields[0].1.clone()
            })
            .write_redis(&url, "out", stop)
    };
    // Stopped after about 1000 entries: what its last checkpoint covers is written.
    copy(checkpointed(&dir), Some(heddle_task::StopHandle::default())).unwrap();
    let first = values(&url, "out").len();
    assert!(first < 3000, "{first} entries written before the stop");
    // Resumed from that checkpoint, to the end.
    copy(checkpointed(&dir), None).unwrap();
    let want: Vec<String> = (0..3000).map(|i| i.to_string()).collect();
    assert_eq!(values(&url, "out"), want);
    // Resumed again from the last checkpoint: nothing is left to write, nothing twice.
    copy(checkpointed(&dir), None).unwrap();
    assert_eq!(values(&url, "out"), want);
    // A fresh start (another checkpoint directory) must not add to that run's output.
    let err = copy(checkpointed(&dir.join("fresh")), None).unwrap_err().to_string();
    assert!(err.contains(&url) && err.contains("an earlier run committed"), "{err}");
    assert_eq!(values(&url, "out"), want);
    std::fs::remove_dir_all(&dir).unwrap();
}
