//! Redis Streams as a stream source (XREAD from a stream key, replayable from the id of
//! the last entry given) and sink (XADD to one; with checkpoints, two phases:
//! `redis_sink`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use heddle_task::{Record, StopHandle};
use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::Commands;
use serde::{Deserialize, Serialize};

use crate::pull::{Pulled, Puller};
use crate::pullers::Pace;
use crate::redis_sink::RedisTxnSink;
use crate::stream::Stream;
use crate::Locked;
use crate::{Error, Result, Session};

/// One entry of a Redis stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedisEntry {
    /// The entry id (`<ms>-<seq>`).
    pub id: String,
    /// Its fields and values, in order.
    pub fields: Vec<(String, String)>,
}

/// Entries read per XREAD.
const READ_COUNT: usize = 1000;

/// A Redis failure on stream `key` at `url`, naming both.
pub(crate) fn redis_err(url: &str, key: &str, e: impl std::fmt::Display) -> Error {
    Error::Io { path: url.to_string(), source: std::io::Error::other(format!("stream {key}: {e}")) }
}

/// A connection to `url` (for stream `key`, named in an error).
pub(crate) fn connect(url: &str, key: &str) -> Result<redis::Connection> {
    let client = redis::Client::open(url).map_err(|e| redis_err(url, key, e))?;
    client.get_connection().map_err(|e| redis_err(url, key, e))
}

/// Partition 0 of `redis_stream`: XREADs a batch at a time after the last id read; its
/// position is the id of the last entry it gave (entries read but not given yet come
/// again after a restore).
struct RedisRead {
    url: String,
    key: String,
    end_field: Option<String>,
    /// Whether this partition reads (partition 0 does; the others end at once).
    reads: bool,
    conn: Option<redis::Connection>,
    /// The id of the last entry read: the next XREAD goes on after it.
    read: String,
    /// The id of the last entry given: the position.
    given: String,
    buffered: VecDeque<RedisEntry>,
    /// The end entry was read: the stream ends once `buffered` is empty.
    ended: bool,
    pace: Pace,
}

impl RedisRead {
    /// Reads the next batch into `buffered` (nothing when no entry is there yet).
    fn fetch(&mut self) -> Result<()> {
        let (url, key) = (self.url.as_str(), self.key.as_str());
        if self.conn.is_none() {
            self.conn = Some(connect(url, key)?);
        }
        let c = self.conn.as_mut().expect("connected above");
        let opts = StreamReadOptions::default().count(READ_COUNT);
        let reply: Option<StreamReadReply> = match c.xread_options(&[key], &[&self.read], &opts) {
            Ok(r) => r,
            Err(e) => {
                self.conn = None;
                return Err(redis_err(url, key, e));
            }
        };
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            self.read.clone_from(&entry.id);
            let mut fields: Vec<(String, String)> = Vec::with_capacity(entry.map.len());
            for (f, v) in &entry.map {
                let v: String = redis::from_redis_value(v).map_err(|e| {
                    redis_err(url, key, format!("entry {} field {f}: {e}", entry.id))
                })?;
                fields.push((f.clone(), v));
            }
            fields.sort();
            if self.end_field.as_ref().is_some_and(|end| fields.iter().any(|(f, _)| f == end)) {
                self.ended = true;
                break;
            }
            self.buffered.push_back(RedisEntry { id: entry.id, fields });
        }
        Ok(())
    }
}

impl Puller<RedisEntry> for RedisRead {
    fn pull(&mut self) -> Result<Pulled<RedisEntry>> {
        if !self.reads {
            return Ok(Pulled::End);
        }
        if self.buffered.is_empty() {
            if self.ended {
                return Ok(Pulled::End);
            }
            self.fetch()?;
            if self.buffered.is_empty() {
                return Ok(if self.ended { Pulled::End } else { Pulled::Pending });
            }
        }
        if !self.pace.due() {
            return Ok(Pulled::Later(self.pace.next_at()));
        }
        let entry = self.buffered.pop_front().expect("not empty");
        self.given.clone_from(&entry.id);
        Ok(Pulled::Item(entry))
    }

    fn position(&self) -> Option<Vec<u8>> {
        Some(self.given.as_bytes().to_vec())
    }

    fn seek(&mut self, position: &[u8]) -> Result<()> {
        let id = std::str::from_utf8(position).map_err(|e| {
            Error::InvalidArgument(format!(
                "redis_stream {} at {}: a checkpointed position is not an entry id: {e}",
                self.key, self.url
            ))
        })?;
        (self.read, self.given) = (id.to_string(), id.to_string());
        self.buffered.clear();
        self.ended = false;
        Ok(())
    }
}

impl Session {
    /// The entries of the Redis stream `key` at `url` (e.g. `redis://127.0.0.1:6379/`),
    /// after id `after` (`"0"`: from the start); partition 0 reads, at most `rate`
    /// entries per second if given. An entry with a field named `end_field`, if given,
    /// ends the stream (and is not emitted); otherwise it runs until stopped. A server
    /// that cannot be reached fails the run. With checkpoints it replays: a checkpoint
    /// keeps the id of the last entry given, and a restored job reads on after it.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// // A free port, where no server listens: the run fails, naming the URL.
    /// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    /// let url = format!("redis://127.0.0.1:{port}/");
    /// let entries = s.redis_stream(&url, "events", "0", Some("end"), None);
    /// let err = entries.run(|_, _| Ok(()), None).unwrap_err();
    /// assert!(err.to_string().contains(&url) && err.to_string().contains("events"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redis_stream(
        &self,
        url: &str,
        key: &str,
        after: &str,
        end_field: Option<&str>,
        rate: Option<f64>,
    ) -> Stream<RedisEntry> {
        let (url, key, after, end_field) =
            (url.to_string(), key.to_string(), after.to_string(), end_field.map(str::to_string));
        self.stream_of(
            "redis_stream",
            Arc::new(move |i, _| {
                Box::new(RedisRead {
                    url: url.clone(),
                    key: key.clone(),
                    end_field: end_field.clone(),
                    reads: i == 0,
                    conn: None,
                    read: after.clone(),
                    given: after.clone(),
                    buffered: VecDeque::new(),
                    ended: false,
                    pace: Pace::new(rate),
                })
            }),
        )
    }
}

impl<T: Record + std::fmt::Display> Stream<T> {
    /// Appends each record to the Redis stream `key` at `url` as an entry with one field,
    /// `value`, holding the record's `Display`.
    ///
    /// When the session checkpoints ([`Session::with_checkpoints`]) the sink has two
    /// phases and each record is appended exactly once, also across restarts: a
    /// partition's records wait in its state until a checkpoint after them completes,
    /// then go out atomically together with the partition's commit marker in the hash
    /// `<key>:heddle-commits` (field: the partition; value: `<checkpoint> <chunks>`
    /// committed), and a commit that marker already shows is skipped. A fresh start
    /// (no checkpoint to resume) refuses a key whose marker holds an earlier run's
    /// commits. Without checkpoints each record is appended as it comes.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// // A free port, where no server listens: the run fails, naming the URL.
    /// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    /// let url = format!("redis://127.0.0.1:{port}/");
    /// let err = s.stream_from_vec(vec![1u32, 2]).write_redis(&url, "events", None).unwrap_err();
    /// assert!(err.to_string().contains(&url) && err.to_string().contains("events"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Stream::run`]; a connection or command that fails; with checkpoints, a key
    /// an earlier run committed to and no checkpoint to resume from.
    pub fn write_redis(&self, url: &str, key: &str, stop: Option<StopHandle>) -> Result<()> {
        let (url, key) = (url.to_string(), key.to_string());
        if self.data.session.0.checkpoints.is_some() {
            return self.run_into(move |_| RedisTxnSink::new(&url, &key), stop);
        }
        let conn: Arc<Mutex<Option<redis::Connection>>> = Arc::default();
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(move |_, x| {
            let mut conn = conn.locked();
            if conn.is_none() {
                *conn = Some(connect(&url, &key)?);
            }
            let c = conn.as_mut().expect("connected above");
            let _: String = c
                .xadd(&key, "*", &[("value", x.to_string())])
                .map_err(|e| redis_err(&url, &key, e))?;
            Ok(())
        });
        self.run_sink(each, Arc::new(|_| Ok(())), stop)
    }
}
