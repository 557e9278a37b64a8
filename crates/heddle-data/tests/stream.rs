//! Streams: windows against plain computations of the same windows, late events, and
//! the sources and sinks (sockets, a growing file, a stop handle).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::on_workers;
use heddle_data::{Session, Window, Windowed};
use heddle_task::StopHandle;

/// Runs a stream into a vector on every worker; returns all workers' records.
fn gather<T: heddle_task::Record + Send>(
    n: usize,
    make: impl Fn(&Session) -> heddle_data::Stream<T> + Sync,
) -> Vec<T> {
    on_workers(n, |s| {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        make(s)
            .run(
                move |_, x| {
                    g.lock().unwrap().push(x);
                    Ok(())
                },
                None,
            )
            .unwrap();
        let v = std::mem::take(&mut *got.lock().unwrap());
        v
    })
    .into_iter()
    .flatten()
    .collect()
}

type Result3 = (u32, u64, u64, u64, u64);

fn summarize(v: Vec<Windowed<u32, u64>>) -> Vec<Result3> {
    let mut out: Vec<Result3> = v
        .into_iter()
        .filter(|w| !w.update)
        .map(|w| (w.key, w.start, w.end, w.value, w.records))
        .collect();
    out.sort();
    out
}

#[test]
fn count_windows_match_a_plain_computation() {
    // Each key's values arrive in order from one source (the key picks the partition of
    // the source data), so count windows are deterministic.
    let events: Vec<(u32, u64)> = (0..600u64).map(|i| ((i % 3) as u32, i)).collect();
    for n in [1, 2, 3] {
        let tumbling = gather(n, |s| {
            s.stream_from_vec(events.clone()).window(Window::tumbling_count(7), |_| 0, |a, b| a + b)
        });
        let sliding = gather(n, |s| {
            s.stream_from_vec(events.clone()).window(
                Window::sliding_count(4, 2),
                |_| 0,
                |a, b| a + b,
            )
        });
        let mut want_t = Vec::new();
        let mut want_s = Vec::new();
        for k in 0..3u32 {
            let vals: Vec<u64> = events.iter().filter(|e| e.0 == k).map(|e| e.1).collect();
            for (w, c) in vals.chunks(7).enumerate().filter(|(_, c)| c.len() == 7) {
                want_t.push((k, 7 * w as u64, 7 * w as u64 + 7, c.iter().sum(), 7));
            }
            for end in (2..=vals.len()).step_by(2) {
                let start = end.saturating_sub(4);
                want_s.push((
                    k,
                    start as u64,
                    end as u64,
                    vals[start..end].iter().sum(),
                    (end - start) as u64,
                ));
            }
        }
        want_t.sort();
        want_s.sort();
        if n == 1 {
            assert_eq!(summarize(tumbling), want_t);
            assert_eq!(summarize(sliding), want_s);
        } else {
            // With several sources a key's records interleave: same windows, same totals.
            let t = summarize(tumbling);
            assert_eq!(t.len(), want_t.len(), "{n} workers");
            assert!(t.iter().all(|w| w.4 == 7 && w.2 - w.1 == 7), "every window holds 7 records");
            assert_eq!(summarize(sliding).len(), want_s.len());
        }
    }
}

/// Plain event-time windows: every event in each window that contains it.
fn plain_windows(events: &[(u32, u64)], size: u64, slide: u64) -> Vec<Result3> {
    let mut m: BTreeMap<(u32, u64), (u64, u64)> = BTreeMap::new();
    for &(k, t) in events {
        let last = t - t % slide;
        let mut start = last as i64;
        while start >= 0 && start as u64 + size > t {
            let e = m.entry((k, start as u64)).or_default();
            e.0 += 1;
            e.1 += 1;
            start -= slide as i64;
        }
    }
    let mut out: Vec<Result3> =
        m.into_iter().map(|((k, s), (v, c))| (k, s, s + size, v, c)).collect();
    out.sort();
    out
}

#[test]
fn event_time_tumbling_and_sliding_windows_on_1_to_3_workers() {
    // Timestamps slightly out of order (within the allowed out-of-orderness).
    let events: Vec<(u32, u64)> =
        (0..3000u64).map(|i| ((i % 5) as u32, i / 3 + if i % 7 == 0 { 0 } else { 2 })).collect();
    for n in 1..=3 {
        let ooo = Duration::from_millis(50);
        let tum = gather(n, |s| {
            s.stream_from_vec(events.clone()).map(|(k, t)| (k, (t, 1u64))).window(
                Window::tumbling(Duration::from_millis(100)).event_time(ooo, Duration::ZERO),
                |v| v.0,
                |a, b| (a.0.max(b.0), a.1 + b.1),
            )
        });
        let sli = gather(n, |s| {
            s.stream_from_vec(events.clone()).map(|(k, t)| (k, (t, 1u64))).window(
                Window::sliding(Duration::from_millis(100), Duration::from_millis(40))
                    .event_time(ooo, Duration::ZERO),
                |v| v.0,
                |a, b| (a.0.max(b.0), a.1 + b.1),
            )
        });
        let as_counts = |v: Vec<Windowed<u32, (u64, u64)>>| {
            let mut out: Vec<Result3> =
                v.into_iter().map(|w| (w.key, w.start, w.end, w.value.1, w.records)).collect();
            out.sort();
            out
        };
        assert_eq!(as_counts(tum), plain_windows(&events, 100, 100), "tumbling, {n} workers");
        assert_eq!(as_counts(sli), plain_windows(&events, 100, 40), "sliding, {n} workers");
    }
}

#[test]
fn late_events_update_their_window_within_the_lateness_and_are_dropped_after() {
    let events: Vec<(u32, u64)> =
        vec![(1, 1), (1, 3), (1, 12), (1, 2), (1, 30), (1, 4), (1, 16), (1, 35)];
    let (results, late) = on_workers(1, |s| {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let stream = s.stream_from_vec(events.clone()).map(|(k, t)| (k, t)).window(
            Window::tumbling(Duration::from_millis(10))
                .event_time(Duration::from_millis(5), Duration::from_millis(10)),
            |t| *t,
            |a, _| a,
        );
        let late = stream.clone();
        stream
            .map(|w| (w.start, w.end, w.records, w.update))
            .run(
                move |_, x| {
                    g.lock().unwrap().push(x);
                    Ok(())
                },
                None,
            )
            .unwrap();
        let v = std::mem::take(&mut *got.lock().unwrap());
        (v, late.late_records())
    })
    .remove(0);
    // (1,30) moves the watermark to 25: [0,10) and [10,20) fire. (1,4) is past [0,10)'s
    // lateness (10 + 10 <= 25): dropped. (1,16) is late for [10,20) but within its
    // lateness (20 + 10 > 25): the window fires again, updated. The end fires [30,40).
    assert_eq!(
        results,
        vec![(0, 10, 3, false), (10, 20, 1, false), (10, 20, 2, true), (30, 40, 2, false)]
    );
    assert_eq!(late, 1);
}

#[test]
fn session_windows_split_at_gaps() {
    let times = [1u64, 3, 8, 30, 33, 70, 71, 72, 200];
    let events: Vec<(u32, u64)> = times.iter().map(|&t| (0, t)).collect();
    let got = gather(1, |s| {
        s.stream_from_vec(events.clone()).map(|(k, t)| (k, t)).window(
            Window::session(Duration::from_millis(10))
                .event_time(Duration::from_millis(100), Duration::ZERO),
            |t| *t,
            |a, b| a.max(b),
        )
    });
    let sessions: Vec<(u64, u64, u64)> = got.iter().map(|w| (w.start, w.end, w.records)).collect();
    assert_eq!(sessions, vec![(1, 18, 3), (30, 43, 2), (70, 82, 3), (200, 210, 1)]);
}

#[test]
fn processing_time_windows_count_every_record_once() {
    for n in [1, 2] {
        let got = gather(n, |s| {
            s.stream_generate(Some(20_000), Some(4000), |i| ((i % 4) as u32, 1u64)).window(
                Window::tumbling(Duration::from_millis(20)),
                |_| 0,
                |a, b| a + b,
            )
        });
        assert_eq!(got.iter().map(|w| w.value).sum::<u64>(), 4000, "{n} workers");
        assert!(got.iter().all(|w| w.end - w.start == 20 && w.start % 20 == 0));
        assert!(
            got.len() > 1,
            "a paced stream (0.2 s) spreads over several 20 ms windows: {}",
            got.len()
        );
    }
}

#[test]
fn socket_and_growing_file_sources_and_sinks() {
    // A server that sends 500 lines, then closes.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap().to_string();
    let sender = std::thread::spawn(move || {
        let (mut c, _) = server.accept().unwrap();
        for i in 0..500 {
            writeln!(c, "line {i}").unwrap();
        }
    });
    // A sink server that collects what it is sent.
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let sink_addr = sink.local_addr().unwrap().to_string();
    let collector = std::thread::spawn(move || {
        let (c, _) = sink.accept().unwrap();
        BufReader::new(c).lines().map(Result::unwrap).collect::<Vec<String>>()
    });
    on_workers(2, |s| {
        s.socket_text(&addr).map(|l| l.to_uppercase()).write_socket(&sink_addr, None).unwrap()
    });
    sender.join().unwrap();
    let received = collector.join().unwrap();
    assert_eq!(received, (0..500).map(|i| format!("LINE {i}")).collect::<Vec<_>>());

    // A file that grows while it is followed; a marker line ends the stream.
    let dir = std::env::temp_dir().join(format!("heddle-follow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log.txt");
    let p2 = path.clone();
    let writer = std::thread::spawn(move || {
        for batch in 0..5 {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&p2).unwrap();
            for i in 0..40 {
                writeln!(f, "event {}", batch * 40 + i).unwrap();
            }
            drop(f);
            std::thread::sleep(Duration::from_millis(15));
        }
        let mut f = std::fs::OpenOptions::new().append(true).open(&p2).unwrap();
        writeln!(f, "END").unwrap();
    });
    let out = dir.join("out");
    on_workers(2, |s| {
        s.follow_file(&path, Some("END"))
            .filter(|l| l.ends_with('7'))
            .write_lines(&out, None)
            .unwrap()
    });
    writer.join().unwrap();
    let mut lines: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .flat_map(|f| {
            std::fs::read_to_string(f.path()).unwrap().lines().map(String::from).collect::<Vec<_>>()
        })
        .collect();
    lines.sort();
    let mut want: Vec<String> =
        (0..200).filter(|i| i % 10 == 7).map(|i| format!("event {i}")).collect();
    want.sort();
    assert_eq!(lines, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unbounded_stream_runs_until_stopped() {
    let counts = on_workers(2, |s| {
        let stop = StopHandle::default();
        let seen = Arc::new(Mutex::new(0u64));
        let (g, st) = (seen.clone(), stop.clone());
        s.stream_generate(None, None, |i| i)
            .run(
                move |_, _| {
                    *g.lock().unwrap() += 1;
                    if *g.lock().unwrap() == 10_000 {
                        st.stop();
                    }
                    Ok(())
                },
                Some(stop),
            )
            .unwrap();
        let n = *seen.lock().unwrap();
        n
    });
    assert!(counts.iter().all(|&c| c >= 10_000), "{counts:?}");
}

#[test]
fn map_chunks_sees_every_record_once_in_bounded_chunks() {
    let records: Vec<u64> = (0..1000).collect();
    for n in [1, 2, 3] {
        // Each chunk becomes (its length, its sum): every record counted once, no chunk over 7.
        let got = gather(n, |s| {
            s.stream_from_vec(records.clone()).map_chunks(
                7,
                Duration::from_secs(60),
                |c: Vec<u64>| vec![(c.len() as u64, c.iter().sum::<u64>())],
            )
        });
        assert!(
            got.iter().all(|&(len, _)| (1..=7).contains(&len)),
            "{n} workers: chunk sizes {got:?}"
        );
        assert_eq!(got.iter().map(|c| c.0).sum::<u64>(), 1000, "{n} workers");
        assert_eq!(
            got.iter().map(|c| c.1).sum::<u64>(),
            records.iter().sum::<u64>(),
            "{n} workers"
        );
        // Any number of records out per chunk.
        let doubled = gather(n, |s| {
            s.stream_from_vec(records.clone()).map_chunks(
                64,
                Duration::from_secs(60),
                |c: Vec<u64>| c.into_iter().flat_map(|x| [x, x]).collect(),
            )
        });
        let mut want: Vec<u64> = records.iter().flat_map(|&x| [x, x]).collect();
        let mut doubled = doubled;
        doubled.sort_unstable();
        want.sort_unstable();
        assert_eq!(doubled, want, "{n} workers");
    }
}

#[test]
fn map_chunks_hands_a_chunk_over_after_its_delay() {
    // 200 records per partition at 1,000 a second: with room for all of them in one chunk,
    // a 20 ms delay still cuts the input into many chunks as it trickles in.
    let got = gather(2, |s| {
        s.stream_generate(Some(1000), Some(400), |i| i).map_chunks(
            1_000_000,
            Duration::from_millis(20),
            |c: Vec<u64>| vec![c.len() as u64],
        )
    });
    assert_eq!(got.iter().sum::<u64>(), 400);
    assert!(got.len() >= 10, "chunks of {got:?}: the delay did not cut them");
}
