//! A real `redis-server` for the tests that stream from and to Redis.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A `redis-server` of this test on a free port, in a private directory; killed and its
/// directory removed when dropped (also when the test fails).
pub struct Redis {
    child: Child,
    pub dir: PathBuf,
    port: u16,
}

impl Redis {
    pub fn start(name: &str) -> Redis {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let dir =
            std::env::temp_dir().join(format!("heddle-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // The port is free when picked; another process may take it before the server
        // binds it, so a server that exits at once is started again on another.
        for _ in 0..5 {
            let port =
                std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let log = File::create(dir.join("redis.log")).unwrap();
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| {
                    let _ = std::fs::remove_dir_all(&dir);
                    panic!(
                        "cannot start redis-server ({e}): this test needs it; install it \
                         (`apt-get install -y redis-server`, or `make test-deps`)"
                    )
                });
            let mut redis = Redis { child, dir: dir.clone(), port };
            if redis.ready() {
                return redis;
            }
            redis.dir = PathBuf::new(); // the next try uses it
            drop(redis);
        }
        let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        panic!("redis-server did not start on a free port:\n{log}");
    }

    /// Waits until this server answers (false: it exited, another server holds the port, or
    /// 20 s passed).
    fn ready(&mut self) -> bool {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(mut c) = redis::Client::open(self.url()).and_then(|c| c.get_connection()) {
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) {
                    let pid = info.lines().find_map(|l| l.strip_prefix("process_id:"));
                    return pid.map(str::trim) == Some(&self.child.id().to_string());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url()).unwrap().get_connection().unwrap()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
