//! Fuzz target: the CSV and JSON-lines readers of heddle-data on arbitrary file contents.
//!
//! Reading must never panic: every row is a record or a clear error (`on_malformed =
//! "fail"`), or is skipped and counted (`"skip"`). Read in 1 or 3 partitions, the rows are
//! the same, in the same order: no row is lost or read twice at a split boundary.

#![no_main]

use std::sync::OnceLock;

use heddle_data::{OnMalformed, Session};
use libfuzzer_sys::fuzz_target;

/// A session of a world of one reading in `partitions` partitions (1, 2 or 3).
fn session(partitions: u32) -> &'static Session {
    static S: OnceLock<Vec<Session>> = OnceLock::new();
    let all = S.get_or_init(|| {
        (1..=3)
            .map(|p| {
                let comm =
                    heddle_comm::solo(heddle_comm::CommConfig::default()).expect("a world of one");
                Session::new(comm).and_then(|s| s.with_partitions(p)).expect("a session")
            })
            .collect()
    });
    &all[partitions as usize - 1]
}

fn rows<T: heddle_task::Record>(
    read: impl Fn(&Session) -> heddle_data::Result<heddle_data::DataSet<T>>,
    partitions: u32,
) -> Option<Vec<T>> {
    read(session(partitions)).ok()?.collect().ok()?
}

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("heddle-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("input");
    std::fs::write(&path, data).expect("write the input");
    for headers in [false, true] {
        let one = rows(|s| s.read_csv::<Vec<String>>(&path, headers, OnMalformed::Skip), 1);
        let three = rows(|s| s.read_csv::<Vec<String>>(&path, headers, OnMalformed::Skip), 3);
        assert_eq!(one, three, "CSV rows differ between 1 and 3 partitions");
        let _ = rows(|s| s.read_csv::<Vec<String>>(&path, headers, OnMalformed::Fail), 2);
    }
    let one = rows(|s| s.read_json_lines::<serde_json::Value>(&path, OnMalformed::Skip), 1);
    let three = rows(|s| s.read_json_lines::<serde_json::Value>(&path, OnMalformed::Skip), 3);
    assert_eq!(one, three, "JSON lines differ between 1 and 3 partitions");
    let _ = rows(|s| s.read_json_lines::<serde_json::Value>(&path, OnMalformed::Fail), 2);
});
