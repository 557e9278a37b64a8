//! Ping-pong between two threads over in-process rings: the engine's own latency floor.
//! `cargo run --release -p heddle-comm --example pingpong_local`
use heddle_comm::{local_world, CommConfig};

fn main() {
    let comms = local_world(2, CommConfig::default()).expect("world");
    let n = 100_000;
    std::thread::scope(|s| {
        for c in &comms {
            s.spawn(move || {
                let mut b = [0u64];
                let t = std::time::Instant::now();
                for _ in 0..n {
                    if c.rank() == 0 {
                        c.send(&[1u64], 1, 0).expect("send");
                        c.recv(&mut b, 1, 0).expect("recv");
                    } else {
                        c.recv(&mut b, 0, 0).expect("recv");
                        c.send(&b, 0, 0).expect("send");
                    }
                }
                if c.rank() == 0 {
                    println!(
                        "half round trip: {:.3} us",
                        t.elapsed().as_secs_f64() * 1e6 / n as f64 / 2.0
                    );
                }
            });
        }
    });
}
