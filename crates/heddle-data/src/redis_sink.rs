//! The two-phase Redis Streams sink of checkpointed streams (`write_redis` with
//! checkpoints): a partition keeps its records (their `Display`) in its state from one
//! checkpoint to the next (pre-commit); when a checkpoint completes everywhere, the
//! records up to it are appended (commit) by a Lua script that also advances the
//! partition's commit marker, atomically, and does nothing if the marker shows them
//! appended already. A restored job commits what its checkpoint pre-committed, so a
//! commit replayed after a crash appends nothing twice and every record goes out exactly
//! once.
//!
//! ```text
//! HGET out:heddle-commits 2   ->  "17 3"   partition 2 has appended chunks 1..=3 of
//!                                          checkpoint 17, and everything before it
//! ```
//!
//! A checkpoint's records go out in chunks (at most [`CHUNK_RECORDS`] records or
//! [`CHUNK_BYTES`] bytes per script, so one commit never blocks the server long), one
//! after the other; chunks are cut the same way from the same state after a restore.

use std::marker::PhantomData;

use heddle_task::{Compute, Context, Result};
use serde::{Deserialize, Serialize};

use crate::redis_io::{connect, redis_err};

/// Records per commit script at most.
pub(crate) const CHUNK_RECORDS: usize = 1000;
/// Bytes of records per commit script at most (a longer record goes alone).
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// Appends a chunk unless the marker shows it appended, and advances the marker.
/// KEYS: the stream, the marker hash. ARGV: the partition, the checkpoint, the chunk's
/// number (from 1), then the values. Returns 1 (appended) or 0 (appended before).
const COMMIT: &str = r#"
local done = redis.call('HGET', KEYS[2], ARGV[1])
local c, n = 0, 0
if done then
  local a, b = string.match(done, '^(%d+) (%d+)$')
  if not a then
    return redis.error_reply('the marker ' .. KEYS[2] .. ' of partition ' .. ARGV[1] ..
      ' is not "<checkpoint> <chunks>": ' .. done)
  end
  c, n = tonumber(a), tonumber(b)
end
local cp, chunk = tonumber(ARGV[2]), tonumber(ARGV[3])
if c > cp or (c == cp and n >= chunk) then return 0 end
if (c == cp and n ~= chunk - 1) or (c < cp and chunk ~= 1) then
  return redis.error_reply('partition ' .. ARGV[1] .. ' commits chunk ' .. chunk ..
    ' of checkpoint ' .. cp .. ' but the marker ' .. KEYS[2] .. ' is at ' .. done)
end
for i = 4, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'value', ARGV[i])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
return 1
"#;

/// The records of one checkpoint, not yet committed.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    checkpoint: u64,
    values: Vec<String>,
}

/// One partition of a two-phase Redis Streams sink.
pub(crate) struct RedisTxnSink<T> {
    url: String,
    key: String,
    /// The hash of the partitions' commit markers.
    marker: String,
    conn: Option<redis::Connection>,
    /// Records since the last checkpoint.
    current: Vec<String>,
    /// Records of checkpoints taken and not committed yet, oldest first.
    pending: Vec<Batch>,
    restored: bool,
    _records: PhantomData<fn(T)>,
}

impl<T> RedisTxnSink<T> {
    pub(crate) fn new(url: &str, key: &str) -> RedisTxnSink<T> {
        RedisTxnSink {
            url: url.to_string(),
            key: key.to_string(),
            marker: format!("{key}:heddle-commits"),
            conn: None,
            current: Vec::new(),
            pending: Vec::new(),
            restored: false,
            _records: PhantomData,
        }
    }

    /// Appends the records of every pending checkpoint up to `checkpoint`, each chunk
    /// once; a batch leaves `pending` once all of it is appended.
    fn commit(&mut self, partition: u32, checkpoint: u64) -> Result<()> {
        let due = self.pending.iter().take_while(|b| b.checkpoint <= checkpoint).count();
        for batch in &self.pending[..due] {
            for (n, chunk) in chunks(&batch.values).enumerate() {
                let mut script = redis::cmd("EVAL");
                script.arg(COMMIT).arg(2).arg(&self.key).arg(&self.marker);
                script.arg(partition).arg(batch.checkpoint).arg(n + 1).arg(chunk);
                let _appended: i64 = query(&mut self.conn, &self.url, &self.key, &script)?;
            }
        }
        self.pending.drain(..due);
        Ok(())
    }
}

/// Runs `cmd` on `conn` (connecting to `url` first if needed); an error drops the
/// connection and names `url` and `key`.
fn query<R: redis::FromRedisValue>(
    conn: &mut Option<redis::Connection>,
    url: &str,
    key: &str,
    cmd: &redis::Cmd,
) -> Result<R> {
    if conn.is_none() {
        *conn = Some(connect(url, key).map_err(crate::Error::into_task)?);
    }
    let c = conn.as_mut().expect("connected above");
    cmd.query(c).map_err(|e| {
        *conn = None;
        redis_err(url, key, e).into_task()
    })
}

/// `values` cut into chunks of at most [`CHUNK_RECORDS`] records and [`CHUNK_BYTES`]
/// bytes (a longer record is a chunk of its own); an empty list is no chunk.
fn chunks(values: &[String]) -> impl Iterator<Item = &[String]> {
    let mut rest = values;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut n, mut bytes) = (0, 0);
        while n < rest.len()
            && n < CHUNK_RECORDS
            && (n == 0 || bytes + rest[n].len() <= CHUNK_BYTES)
        {
            bytes += rest[n].len();
            n += 1;
        }
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

impl<T: std::fmt::Display + Send + 'static> Compute for RedisTxnSink<T> {
    type In = T;
    type Out = ();

    fn prepare(&mut self, ctx: &mut Context<'_, ()>) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        // A fresh start must not mix with an earlier run's commits: its checkpoint ids
        // start again, and the marker would skip them.
        let (marker, partition) = (&self.marker, ctx.index());
        let mut hget = redis::cmd("HGET");
        hget.arg(marker).arg(partition);
        let earlier: Option<String> = query(&mut self.conn, &self.url, &self.key, &hget)?;
        if let Some(at) = earlier {
            return Err(redis_err(
                &self.url,
                &self.key,
                format!(
                    "an earlier run committed to it (field {partition} of {marker}: up to \
                     checkpoint {}) and there is no checkpoint to resume it from; delete {} \
                     and {marker}, or write to another key",
                    at.split(' ').next().unwrap_or_default(),
                    self.key
                ),
            )
            .into_task());
        }
        Ok(())
    }

    fn execute(&mut self, _: &mut Context<'_, ()>, x: T) -> Result<()> {
        self.current.push(x.to_string());
        Ok(())
    }

    fn snapshot(&mut self, _: &mut Context<'_, ()>, checkpoint: u64) -> Result<Option<Vec<u8>>> {
        if !self.current.is_empty() {
            let values = std::mem::take(&mut self.current);
            self.pending.push(Batch { checkpoint, values });
        }
        bincode::serialize(&self.pending).map(Some).map_err(|e| {
            heddle_task::Error::Graph(format!(
                "a Redis sink's pending records for {} do not encode: {e}",
                self.key
            ))
        })
    }

    fn committed(&mut self, ctx: &mut Context<'_, ()>, checkpoint: u64) -> Result<()> {
        self.commit(ctx.index(), checkpoint)
    }

    fn restore(&mut self, ctx: &mut Context<'_, ()>, state: &[u8]) -> Result<()> {
        self.pending = bincode::deserialize(state).map_err(|e| {
            heddle_task::Error::Graph(format!(
                "{}: its checkpointed records for Redis stream {} do not decode: {e}",
                ctx.info(),
                self.key
            ))
        })?;
        self.restored = true;
        // The checkpoint is complete: what it pre-committed is committed.
        self.commit(ctx.index(), u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_at_most_their_records_and_bytes_in_order() {
        let values: Vec<String> = (0..2500).map(|i| i.to_string()).collect();
        let sizes: Vec<usize> = chunks(&values).map(<[String]>::len).collect();
        assert_eq!(sizes, vec![1000, 1000, 500]);
        assert_eq!(chunks(&values).flatten().cloned().collect::<Vec<_>>(), values);
        let big = vec!["x".repeat(CHUNK_BYTES), "y".into(), "z".repeat(CHUNK_BYTES)];
        let sizes: Vec<usize> = chunks(&big).map(<[String]>::len).collect();
        assert_eq!(sizes, vec![1, 1, 1]);
        assert_eq!(chunks(&[]).count(), 0);
    }

    /// A redis-server on a free port (Debian's package; `make test` installs it), killed
    /// when dropped.
    struct Server(std::process::Child, String);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A redis-server of this test's own: tests run in parallel, and two may be handed the
    /// same free port, so a server that could not bind it (it exits) is started again on
    /// another.
    fn server() -> Server {
        for _ in 0..20 {
            let port =
                std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server is not installed: run `apt-get install -y redis-server`");
            let mut server = Server(child, format!("redis://127.0.0.1:{port}/"));
            for _ in 0..500 {
                if server.0.try_wait().ok().flatten().is_some() {
                    break; // it exited: the port was taken
                }
                if let Some(pid) = listening_pid(&server.1) {
                    // Listening: ours, or another test's that took the port first.
                    if pid == server.0.id() {
                        return server;
                    }
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
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

    fn sink(url: &str, pending: &[(u64, usize)]) -> RedisTxnSink<String> {
        let mut s = RedisTxnSink::new(url, "out");
        for &(checkpoint, n) in pending {
            let values = (0..n).map(|i| format!("{checkpoint}.{i}")).collect();
            s.pending.push(Batch { checkpoint, values });
        }
        s
    }

    fn values(url: &str) -> Vec<String> {
        let mut c = connect(url, "out").unwrap();
        let entries: Vec<(String, Vec<String>)> =
            redis::cmd("XRANGE").arg("out").arg("-").arg("+").query(&mut c).unwrap();
        entries.into_iter().map(|(_, f)| f[1].clone()).collect()
    }

    fn marker(url: &str, partition: u32) -> Option<String> {
        let mut c = connect(url, "out").unwrap();
        redis::cmd("HGET").arg("out:heddle-commits").arg(partition).query(&mut c).unwrap()
    }

    #[test]
    fn a_commit_appends_each_chunk_once_however_often_it_is_replayed() {
        let server = server();
        let url = server.1.as_str();
        let mut first = sink(url, &[(3, 2500), (5, 10)]);
        first.commit(0, 3).unwrap();
        assert_eq!(values(url).len(), 2500);
        assert_eq!(marker(url, 0).as_deref(), Some("3 3"));
        assert_eq!(first.pending.len(), 1);
        // A restored job commits everything its checkpoint held: only 5 is new.
        sink(url, &[(3, 2500), (5, 10)]).commit(0, u64::MAX).unwrap();
        assert_eq!(marker(url, 0).as_deref(), Some("5 1"));
        // Checkpoint 7 was cut off after its first chunk: the rest follows, once.
        let mut c = connect(url, "out").unwrap();
        let _: i64 =
            redis::cmd("HSET").arg("out:heddle-commits").arg(0).arg("7 1").query(&mut c).unwrap();
        sink(url, &[(7, 2500)]).commit(0, 7).unwrap();
        sink(url, &[(7, 2500)]).commit(0, 7).unwrap();
        let want: Vec<String> = (0..2500)
            .map(|i| format!("3.{i}"))
            .chain((0..10).map(|i| format!("5.{i}")))
            .chain((1000..2500).map(|i| format!("7.{i}")))
            .collect();
        assert_eq!(values(url), want);
        // Another partition has its own marker.
        sink(url, &[(7, 1)]).commit(1, 7).unwrap();
        assert_eq!(marker(url, 1).as_deref(), Some("7 1"));
        assert_eq!(values(url).len(), want.len() + 1);
    }

    #[test]
    fn a_damaged_marker_fails_the_commit_naming_it_and_the_server() {
        let server = server();
        let url = server.1.as_str();
        let mut c = connect(url, "out").unwrap();
        let _: i64 =
            redis::cmd("HSET").arg("out:heddle-commits").arg(2).arg("x").query(&mut c).unwrap();
        let err = sink(url, &[(1, 5)]).commit(2, 1).unwrap_err().to_string();
        assert!(err.contains(url) && err.contains("out:heddle-commits"), "{err}");
        assert!(values(url).is_empty());
    }
}
