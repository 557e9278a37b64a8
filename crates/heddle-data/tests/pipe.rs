//! `DataSet::pipe` through the Python SDK's reference filter (`sdk/python`): text and typed
//! records on several partitions and transports, against the same computation in Rust.

use heddle_bridge::{BridgeConfig, FilterCommand, Transport};
use heddle_data::{DataSet, Session};

fn reference() -> FilterCommand {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk/python/tests/reference_filter.py");
    FilterCommand::new("python3").arg(path.display().to_string())
}

fn session(partitions: u32) -> Session {
    Session::new(heddle_comm::solo(Default::default()).unwrap())
        .unwrap()
        .with_partitions(partitions)
        .unwrap()
}

#[test]
fn text_through_every_transport_matches_rust() {
    let s = session(3);
    let words: Vec<String> = (0..1000).map(|i| format!("word{i} Ünïcode")).collect();
    for t in Transport::ALL {
        let out: DataSet<String> = s.from_vec(words.clone()).pipe(reference(), t);
        let mut got = out.collect().unwrap().unwrap();
        // one finalize line per partition: its record count (no prefix argument given)
        let finals: Vec<usize> = got.iter().filter_map(|w| w.parse().ok()).collect();
        got.retain(|w| w.parse::<usize>().is_err());
        got.sort();
        let mut want: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        want.sort();
        assert!(got == want, "over {t}: {} results, {} expected", got.len(), want.len());
        let n: usize = finals.iter().sum();
        assert_eq!((finals.len(), n), (3, 1000), "over {t}");
    }
}

#[test]
fn typed_records_cross_without_text() {
    let s = session(2);
    let rows: Vec<Vec<f64>> = (0..200).map(|i| vec![f64::from(i), 0.25, -1.0]).collect();
    let cfg = BridgeConfig::new("sum").args(["unused"]);
    let sums: DataSet<Vec<f64>> = s.from_vec(rows.clone()).pipe_with(reference(), cfg);
    // finalize's text record cannot be read as Vec<f64>: the job names the type
    let err = sums.collect().unwrap_err().to_string();
    assert!(err.contains("Vec<f64>") && err.contains("Utf8"), "{err}");
}

#[test]
fn a_missing_program_fails_the_job_with_its_name() {
    let s = session(2);
    let out: DataSet<String> = s
        .from_vec(vec!["a".to_string()])
        .pipe(FilterCommand::new("no-such-bridge-filter"), Transport::Pipe);
    let err = out.collect().unwrap_err().to_string();
    assert!(err.contains("no-such-bridge-filter") && err.contains("PATH"), "{err}");
}
