//! Demo: every BSP collective on the world communicator, each result checked against a
//! value computed locally. Run with `heddle run -n 4 -- target/release/examples/collectives`.
//! Rank 0 ends with one JSON line: {"example": "collectives", "ok": true, ...}.

use std::time::Instant;

use clap::Parser;
use heddle::{Communicator, Op};

/// Runs each collective once (per size) and verifies it.
#[derive(Debug, Parser)]
struct Args {
    /// Elements per rank in each collective.
    #[arg(long, default_value_t = 100_000)]
    elements: usize,
    /// Print one line per checked collective.
    #[arg(long)]
    verbose: bool,
}

fn check(
    comm: &Communicator,
    name: &str,
    ok: bool,
    verbose: bool,
    results: &mut Vec<(String, bool)>,
) {
    if verbose {
        println!("rank {}: {name}: {}", comm.rank(), if ok { "ok" } else { "WRONG" });
    }
    results.push((name.to_string(), ok));
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let comm = heddle::init()?;
    let (r, p, n) = (comm.rank(), comm.size(), args.elements);
    let v = |rank: usize, i: usize| (rank * 31 + i % 97) as f64;
    let mut results = Vec::new();

    let mut x: Vec<f64> = (0..n).map(|i| v(r, i)).collect();
    comm.allreduce(&mut x, Op::Sum)?;
    let ok = (0..n).all(|i| x[i] == (0..p).map(|q| v(q, i)).sum::<f64>());
    check(&comm, "allreduce(sum)", ok, args.verbose, &mut results);

    let mut m = [r as i64 * 7 % 5];
    comm.allreduce(&mut m, Op::Max)?;
    check(
        &comm,
        "allreduce(max)",
        m[0] == (0..p).map(|q| q as i64 * 7 % 5).max().unwrap_or(0),
        args.verbose,
        &mut results,
    );

    let mut b: Vec<u32> = if r == p - 1 { (0..n as u32).collect() } else { vec![0; n] };
    comm.broadcast(&mut b, p - 1)?;
    check(
        &comm,
        "broadcast",
        b.iter().enumerate().all(|(i, &x)| x == i as u32),
        args.verbose,
        &mut results,
    );

    let send: Vec<f64> = (0..n).map(|i| v(r, i)).collect();
    let mut red = if r == 0 { vec![0.0; n] } else { Vec::new() };
    comm.reduce(&send, &mut red, Op::Sum, 0)?;
    let ok = r != 0 || (0..n).all(|i| red[i] == (0..p).map(|q| v(q, i)).sum::<f64>());
    check(&comm, "reduce", ok, args.verbose, &mut results);

    let mut all = vec![0u64; p * 3];
    comm.allgather(&[r as u64; 3], &mut all)?;
    check(
        &comm,
        "allgather",
        all.chunks(3).enumerate().all(|(q, c)| c == [q as u64; 3]),
        args.verbose,
        &mut results,
    );

    let mut g = if r == 0 { vec![0i32; p * 2] } else { Vec::new() };
    comm.gather(&[r as i32, -(r as i32)], &mut g, 0)?;
    let ok = r != 0 || g.chunks(2).enumerate().all(|(q, c)| c == [q as i32, -(q as i32)]);
    check(&comm, "gather", ok, args.verbose, &mut results);

    let src: Vec<i32> = if r == 0 { (0..p as i32 * 2).collect() } else { Vec::new() };
    let mut mine = [0i32; 2];
    comm.scatter(&src, &mut mine, 0)?;
    check(&comm, "scatter", mine == [2 * r as i32, 2 * r as i32 + 1], args.verbose, &mut results);

    let out: Vec<u32> = (0..p).map(|q| (r * 100 + q) as u32).collect();
    let mut inc = vec![0u32; p];
    comm.alltoall(&out, &mut inc)?;
    check(
        &comm,
        "alltoall",
        (0..p).all(|q| inc[q] == (q * 100 + r) as u32),
        args.verbose,
        &mut results,
    );

    let rs_send: Vec<i64> = (0..2 * p).map(|i| (r + i) as i64).collect();
    let mut rs = [0i64; 2];
    comm.reduce_scatter_block(&rs_send, &mut rs, Op::Sum)?;
    let expect = |i: usize| (0..p).map(|q| (q + i) as i64).sum::<i64>();
    check(
        &comm,
        "reduce_scatter",
        rs == [expect(2 * r), expect(2 * r + 1)],
        args.verbose,
        &mut results,
    );

    let sub =
        comm.split(Some((r % 2) as u32), r as i64)?.ok_or("split returned no communicator")?;
    let mut s = [1u32];
    sub.allreduce(&mut s, Op::Sum)?;
    check(
        &comm,
        "split+allreduce",
        s[0] as usize == (0..p).filter(|q| q % 2 == r % 2).count(),
        args.verbose,
        &mut results,
    );

    comm.barrier()?;
    check(&comm, "barrier", true, args.verbose, &mut results);

    // Every rank's verdicts, combined: ok only if every check passed everywhere.
    let mut all_ok = [u8::from(results.iter().all(|(_, ok)| *ok))];
    comm.allreduce(&mut all_ok, Op::Min)?;
    let failed: Vec<&str> = results.iter().filter(|(_, ok)| !ok).map(|(n, _)| n.as_str()).collect();
    if !failed.is_empty() {
        eprintln!("rank {r}: wrong results from {failed:?}");
    }
    if r == 0 {
        println!(
            "{{\"example\": \"collectives\", \"ok\": {}, \"job_s\": {:.3}, \"ranks\": {p}, \
             \"elements\": {n}, \"checks\": {}, \"tcp_peers\": {}}}",
            all_ok[0] == 1,
            start.elapsed().as_secs_f64(),
            results.len(),
            comm.tcp_peers()
        );
    }
    if all_ok[0] == 1 {
        Ok(())
    } else {
        Err("some collective returned a wrong result".into())
    }
}
