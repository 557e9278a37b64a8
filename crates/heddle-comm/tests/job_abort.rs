//! A collective that fails on one rank aborts the job: the other ranks' pending calls
//! return `Error::Aborted` naming the origin, promptly (not after the timeout), and every
//! later call fails the same way.

use std::time::{Duration, Instant};

use heddle_comm::{local_world, CommConfig, Error, Op};

#[test]
fn a_failed_receive_on_one_rank_aborts_the_others_pending_calls() {
    let config = CommConfig { timeout: Duration::from_secs(60), ..CommConfig::default() };
    let comms = local_world(3, config).unwrap();
    let started = Instant::now();
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || -> Result<(), Error> {
                    match c.rank() {
                        0 => c.send(&[1u64, 2, 3, 4], 1, 7),
                        // A buffer too small for the message: this rank fails.
                        1 => c.recv(&mut [0u64; 2], 0, 7).map(|_| ()),
                        _ => {
                            let mut x = [1.0f64; 4];
                            c.allreduce(&mut x, Op::Sum)
                        }
                    }?;
                    // Rank 0 reaches a collective that rank 1 never joins.
                    c.barrier()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(started.elapsed() < Duration::from_secs(30), "the abort must not wait for the timeout");
    assert!(matches!(&results[1], Err(Error::Truncated { .. })), "{:?}", results[1]);
    for r in [0, 2] {
        match &results[r] {
            Err(Error::Aborted(cause)) => {
                assert_eq!((cause.origin, cause.kind.as_str()), (1, "Truncated"), "rank {r}");
                assert!(cause.message.contains("does not fit"), "{cause}");
            }
            other => panic!("rank {r}: {other:?}"),
        }
    }
    // Every later call fails at once with the same cause.
    let err = comms[0].barrier().unwrap_err();
    assert!(matches!(&err, Error::Aborted(c) if c.origin == 1), "{err}");
    assert!(err.to_string().starts_with("the job was aborted: rank 1 failed: Truncated:"), "{err}");
}

/// A message sent as one element type and received into a buffer of another fails on the
/// receiver naming both types (it used to be read as the receiver's type), and the job is
/// aborted, so the sender's next call names them too.
#[test]
fn a_typed_message_into_a_buffer_of_another_type_is_refused_naming_both() {
    let comms = local_world(2, CommConfig::default()).unwrap();
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || -> Result<(), Error> {
                    if c.rank() == 0 {
                        c.send(&[1.5f64, 2.5], 1, 3)?;
                    } else {
                        c.recv(&mut [0i32; 4], 0, 3)?;
                    }
                    c.barrier()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    match &results[1] {
        Err(Error::TypeMismatch { rank: 0, sent, expected }) => {
            assert_eq!((sent.as_str(), expected.as_str()), ("f64", "i32"))
        }
        other => panic!("rank 1: {other:?}"),
    }
    match &results[0] {
        Err(Error::Aborted(cause)) => assert!(
            cause.message.contains("sent f64 elements but the receive buffer holds i32"),
            "{cause}"
        ),
        other => panic!("rank 0: {other:?}"),
    }
    // Bytes and untyped data still go anywhere.
    let comms = local_world(2, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        for c in &comms {
            s.spawn(move || {
                if c.rank() == 0 {
                    c.send_bytes(&7.0f64.to_le_bytes(), 1, 0).unwrap();
                } else {
                    let mut x = [0f64; 1];
                    assert_eq!(c.recv(&mut x, 0, 0).unwrap(), 1);
                    assert_eq!(x[0], 7.0);
                }
            });
        }
    });
}

/// A worker waiting on a dataflow edge finds its peer gone a moment before the job
/// master's word that the peer failed: it reports the abort (the peer's own error), not
/// the lost peer, as a collective does. (Seen on a loaded machine: a Python rank that
/// raised exited before its abort reached the others.)
#[test]
fn a_dataflow_wait_reports_an_abort_that_follows_the_peer_loss() {
    use std::net::{TcpListener, TcpStream};

    use heddle_comm::{AbortCause, WorldBuilder};

    let config = CommConfig { timeout: Duration::from_secs(30), ..CommConfig::default() };
    let mut b0 = WorldBuilder::new(0, 2, config.clone()).unwrap();
    let mut b1 = WorldBuilder::new(1, 2, config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    b0.add_tcp(1, TcpStream::connect(listener.local_addr().unwrap()).unwrap()).unwrap();
    b1.add_tcp(0, listener.accept().unwrap().0).unwrap();
    let (c0, c1) = (b0.build().unwrap(), b1.build().unwrap());
    let mut edge = c0.open_edge(5, 1 << 16).unwrap();
    let abort = c0.abort_handle();
    // Rank 1 dies; its abort arrives 60 ms later.
    drop(c1);
    let relay = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(60));
        abort.receive(AbortCause::new(1, "ValueError", "boom on rank 1"));
    });
    let err = loop {
        let moved = match edge.lock().poll() {
            Ok(moved) => moved,
            Err(e) => break e,
        };
        if moved {
            edge.moved();
        } else if let Err(e) = edge.wait(&[1], &|| "a record from rank 1".into()) {
            break e;
        }
    };
    relay.join().unwrap();
    match err {
        Error::Aborted(cause) => assert_eq!((cause.origin, cause.kind.as_str()), (1, "ValueError")),
        other => panic!("expected the abort, got {other:?}"),
    }
}
