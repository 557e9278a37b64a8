//! Redis Streams as a stream source and sink (XREAD from a stream key; XADD to one).

use std::sync::{Arc, Mutex};

use heddle_task::{Record, StopHandle};
use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::Commands;
use serde::{Deserialize, Serialize};

use crate::pull::Pulled;
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

fn redis_err(url: &str, e: redis::RedisError) -> Error {
    Error::Io { path: url.to_string(), source: std::io::Error::other(e.to_string()) }
}

impl Session {
    /// The entries of the Redis stream `key` at `url` (e.g. `redis://127.0.0.1:6379/`),
    /// after id `after` (`"0"`: from the start); partition 0 reads. An entry with a field
    /// named `end_field`, if given, ends the stream (and is not emitted); otherwise it runs
    /// until stopped. A server that cannot be reached fails the run.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// // A free port, where no server listens: the run fails, naming the URL.
    /// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    /// let url = format!("redis://127.0.0.1:{port}/");
    /// let entries = s.redis_stream(&url, "events", "0", Some("end"));
    /// let err = entries.run(|_, _| Ok(()), None).unwrap_err();
    /// assert!(err.to_string().contains(&url));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redis_stream(
        &self,
        url: &str,
        key: &str,
        after: &str,
        end_field: Option<&str>,
    ) -> Stream<RedisEntry> {
        let (url, key, after, end_field) =
            (url.to_string(), key.to_string(), after.to_string(), end_field.map(str::to_string));
        self.stream_of(
            "redis_stream",
            Arc::new(move |i, _| {
                let (url, key, end_field) = (url.clone(), key.clone(), end_field.clone());
                let mut last = after.clone();
                let mut conn: Option<redis::Connection> = None;
                let mut buffered: std::collections::VecDeque<RedisEntry> = Default::default();
                let mut ended = i != 0;
                Box::new(move || {
                    if let Some(e) = buffered.pop_front() {
                        return Ok(Pulled::Item(e));
                    }
                    if ended {
                        return Ok(Pulled::End);
                    }
                    if conn.is_none() {
                        let client =
                            redis::Client::open(url.as_str()).map_err(|e| redis_err(&url, e))?;
                        conn = Some(client.get_connection().map_err(|e| redis_err(&url, e))?);
                    }
                    let c = conn.as_mut().expect("connected above");
                    let reply: Option<StreamReadReply> = c
                        .xread_options(
                            &[&key],
                            &[&last],
                            &StreamReadOptions::default().count(READ_COUNT),
                        )
                        .map_err(|e| redis_err(&url, e))?;
                    let Some(reply) = reply else { return Ok(Pulled::Pending) };
                    for s in reply.keys {
                        for entry in s.ids {
                            last.clone_from(&entry.id);
                            let mut fields: Vec<(String, String)> = Vec::new();
                            for (f, v) in &entry.map {
                                let v: String =
                                    redis::from_redis_value(v).map_err(|e| redis_err(&url, e))?;
                                fields.push((f.clone(), v));
                            }
                            fields.sort();
                            if end_field
                                .as_ref()
                                .is_some_and(|end| fields.iter().any(|(f, _)| f == end))
                            {
                                ended = true;
                                break;
                            }
                            buffered.push_back(RedisEntry { id: entry.id.clone(), fields });
                        }
                    }
                    Ok(buffered.pop_front().map_or(Pulled::Pending, Pulled::Item))
                })
            }),
        )
    }
}

impl<T: Record + std::fmt::Display> Stream<T> {
    /// Appends each record to the Redis stream `key` at `url` as an entry with one field,
    /// `value`, holding the record's `Display`.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// // A free port, where no server listens: the run fails, naming the URL.
    /// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    /// let url = format!("redis://127.0.0.1:{port}/");
    /// let err = s.stream_from_vec(vec![1u32, 2]).write_redis(&url, "events", None).unwrap_err();
    /// assert!(err.to_string().contains(&url));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Stream::run`]; a connection or command that fails.
    pub fn write_redis(&self, url: &str, key: &str, stop: Option<StopHandle>) -> Result<()> {
        let (url, key) = (url.to_string(), key.to_string());
        let conn: Arc<Mutex<Option<redis::Connection>>> = Arc::default();
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(move |_, x| {
            let mut conn = conn.locked();
            if conn.is_none() {
                let client = redis::Client::open(url.as_str()).map_err(|e| redis_err(&url, e))?;
                *conn = Some(client.get_connection().map_err(|e| redis_err(&url, e))?);
            }
            let c = conn.as_mut().expect("connected above");
            let _: String =
                c.xadd(&key, "*", &[("value", x.to_string())]).map_err(|e| redis_err(&url, e))?;
            Ok(())
        });
        self.run_sink(each, Arc::new(|_| Ok(())), stop)
    }
}
