//! The registry's sums, buckets and samples.

use super::*;

#[test]
fn collectives_fall_in_their_latency_buckets() {
    collective("test_op", "linear", 8, Duration::from_micros(3));
    collective("test_op", "linear", 8, Duration::from_secs(10));
    let s = snapshot();
    let c = s.collectives.iter().find(|c| c.operation == "test_op").unwrap();
    assert_eq!((c.calls, c.bytes), (2, 16));
    assert_eq!(c.buckets[1], 1, "3 µs is in the 5 µs bucket");
    assert_eq!(c.buckets[LATENCY_BUCKETS.len()], 1, "10 s is above every bound");
}

#[test]
fn the_process_uses_some_cpu_and_memory() {
    let (cpu, rss) = process_usage();
    let spin = std::time::Instant::now();
    while spin.elapsed() < Duration::from_millis(30) {}
    let (cpu2, _) = process_usage();
    assert!(rss > 1 << 20, "{rss}");
    assert!(cpu2 >= cpu, "{cpu} then {cpu2}");
}

#[test]
fn a_waiting_sender_is_sampled_as_blocked() {
    let e = edge("a -> b");
    let mut was = false;
    e.set_waiting(true, &mut was);
    std::thread::sleep(Duration::from_millis(100));
    e.set_waiting(false, &mut was);
    let s = snapshot();
    let sample = s.edges.iter().find(|e| e.edge == "a -> b").unwrap();
    assert!(sample.blocked > 0 && sample.blocked <= sample.samples, "{sample:?}");
}
