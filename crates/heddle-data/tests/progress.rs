//! What a batch stage reports to the launcher's progress bar: a range counts records of a
//! known total; text, CSV and block sources count the bytes of their files, which at the
//! end of the stage are every byte of the input — CRLF lines, empty lines and a missing
//! final newline included. One worker: the counts are process-wide, and so is this test.

mod common;

use common::on_workers;
use heddle_comm::metrics::{self, ProgressSample};
use heddle_data::OnMalformed;

fn progress() -> ProgressSample {
    metrics::snapshot().progress.expect("a stage ran")
}

#[test]
fn file_sources_count_every_byte_and_ranges_count_records() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("in.txt");
    let body = "alpha beta\r\n\r\ngamma\n\nδέλτα epsilon\nlast line, no newline";
    std::fs::write(&text, body).unwrap();
    let csv = dir.path().join("rows.csv");
    std::fs::write(&csv, "id,name\n1,ann\n2,bob\n3,cy\n").unwrap();
    let (text_len, csv_len) = (body.len() as u64, std::fs::metadata(&csv).unwrap().len());
    on_workers(1, |s| {
        assert_eq!(s.range(0, 1234).count().unwrap(), 1234);
        let p = progress();
        assert_eq!((p.done, p.total, p.bytes_total), (1234, Some(1234), None), "{p:?}");

        assert_eq!(s.text_file(&text).unwrap().count().unwrap(), 6);
        let p = progress();
        assert_eq!((p.bytes_done, p.bytes_total, p.total), (text_len, Some(text_len), None));

        for block in [1, 7, 4096] {
            let blocks = s.text_blocks(&text, block).unwrap().collect().unwrap().unwrap();
            assert_eq!(blocks.concat().len() as u64, text_len + 1, "the last line gains its \\n");
            let p = progress();
            assert_eq!((p.bytes_done, p.bytes_total), (text_len, Some(text_len)), "{block}");
        }

        let rows = s.read_csv::<(u32, String)>(&csv, true, OnMalformed::Fail).unwrap();
        assert_eq!(rows.count().unwrap(), 3);
        let p = progress();
        assert_eq!((p.bytes_done, p.bytes_total), (csv_len, Some(csv_len)), "{p:?}");
    });
}
