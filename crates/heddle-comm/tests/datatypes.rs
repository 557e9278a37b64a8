//! Derived datatypes on the wire: a column of a row-major matrix sent to a row and back,
//! indexed and repeated types, the contiguous path, and short messages — in-process and
//! over TCP, checked against the element indices computed here.

mod common;

use common::{configs, on_every_rank, tcp_world};
use heddle_comm::{local_world, Communicator, Datatype, Error};

fn worlds() -> Vec<Vec<Communicator>> {
    configs()
        .into_iter()
        .flat_map(|c| [local_world(2, c.clone()).unwrap(), tcp_world(2, &c)])
        .collect()
}

const ROWS: usize = 300;
const COLS: usize = 7;

#[test]
fn a_matrix_column_crosses_as_a_row_and_comes_back_as_a_column() {
    let column = Datatype::<f64>::vector(ROWS, 1, COLS).unwrap();
    let row = Datatype::<f64>::contiguous(ROWS);
    for comms in worlds() {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                let m: Vec<f64> = (0..ROWS * COLS).map(|i| i as f64).collect();
                c.send_typed(&m[3..], &column, 1, 1).unwrap();
                let mut back = vec![-1.0; ROWS * COLS];
                assert_eq!(c.recv_typed(&mut back[5..], &column, 1, 2).unwrap(), ROWS);
                for (i, &x) in back.iter().enumerate() {
                    let want = if i % COLS == 5 { ((i / COLS) * COLS + 3) as f64 } else { -1.0 };
                    assert_eq!(x, want, "element {i}");
                }
            } else {
                let mut r = vec![0.0; ROWS];
                assert_eq!(c.recv_typed(&mut r, &row, 0, 1).unwrap(), ROWS);
                assert_eq!(r, (0..ROWS).map(|k| (k * COLS + 3) as f64).collect::<Vec<_>>());
                c.send_typed(&r, &row, 0, 2).unwrap();
            }
        });
    }
}

#[test]
fn indexed_and_repeated_types_and_short_messages() {
    // Two records of (a field of 2 at 4, a field of 1 at 0) in records of extent 6.
    let record = Datatype::<i32>::indexed(&[2, 1], &[4, 0]).unwrap();
    let two = Datatype::<i32>::indexed(&[2, 1, 0], &[4, 0, 6]).unwrap().repeat(2);
    assert_eq!((two.size(), two.extent()), (6, 12));
    for comms in worlds() {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                let buf: Vec<i32> = (0..12).collect();
                c.send_typed(&buf, &two, 1, 0).unwrap();
                c.send(&[7i32, 8], 1, 1).unwrap(); // shorter than the type
                c.send(&[1i32; 4], 1, 2).unwrap(); // longer than the type
            } else {
                let mut got = vec![0i32; 6];
                c.recv_typed(&mut got, &Datatype::contiguous(6), 0, 0).unwrap();
                assert_eq!(got, [4, 5, 0, 10, 11, 6]);
                let mut buf = vec![-1i32; 6];
                assert_eq!(c.recv_typed(&mut buf, &record, 0, 1).unwrap(), 2);
                assert_eq!(buf, [-1, -1, -1, -1, 7, 8]);
                let e = c.recv_typed(&mut buf, &record, 0, 2).unwrap_err();
                assert!(matches!(e, Error::Truncated { got: 16, capacity: 12, .. }), "{e}");
            }
        });
    }
}
