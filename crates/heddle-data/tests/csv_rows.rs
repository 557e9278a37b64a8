//! CSV rows with too few or too many fields are never dropped silently nor misaligned: they
//! fail with the file, the line and both field counts, or are skipped and counted; blank
//! lines, CRLF and a missing final newline read as a user expects.

mod common;

use common::on_workers;
use heddle_data::OnMalformed;

/// 40 rows of 3 fields; rows 7 (2 fields) and 23 (4 fields) are ragged; CRLF endings,
/// blank lines, no final newline. Returns the file's text and the good rows.
fn ragged(header: bool) -> (String, Vec<Vec<String>>) {
    let mut text = String::new();
    if header {
        text.push_str("name,qty,note\r\n");
    }
    let mut good = Vec::new();
    for i in 0..40 {
        let row: Vec<String> = match i {
            7 => vec![format!("n{i}"), i.to_string()],
            23 => vec![format!("n{i}"), i.to_string(), "x".into(), "extra".into()],
            _ => vec![format!("n{i}"), i.to_string(), format!("\"q,{i}\"")],
        };
        if i % 9 == 4 {
            text.push_str("\r\n"); // a blank line
        }
        text.push_str(&row.join(","));
        if i < 39 {
            text.push_str("\r\n");
        }
        if i != 7 && i != 23 {
            good.push(vec![format!("n{i}"), i.to_string(), format!("q,{i}")]);
        }
    }
    (text, good)
}

/// The file line of row `i` of [`ragged`].
fn line_of(i: usize, header: bool) -> usize {
    i + 1 + usize::from(header) + (0..=i).filter(|j| j % 9 == 4).count()
}

#[test]
fn ragged_rows_fail_with_file_line_and_counts_or_are_skipped_and_counted() {
    let dir = std::env::temp_dir().join(format!("heddle-csv-rows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for header in [true, false] {
        let (text, good) = ragged(header);
        let path = dir.join(format!("ragged-{header}.csv"));
        std::fs::write(&path, text).unwrap();
        let err = on_workers(1, |s| {
            s.read_csv::<Vec<String>>(&path, header, OnMalformed::Fail)
                .unwrap()
                .collect_all()
                .unwrap_err()
                .to_string()
        })
        .remove(0);
        let from = if header { "the header of" } else { "line 1 of" };
        assert!(err.contains(&format!("ragged-{header}.csv line {}", line_of(7, header))), "{err}");
        assert!(
            err.contains(&format!("expected 3 fields (as {from}")) && err.contains("found 2"),
            "{err}"
        );
        for n in [1, 2, 3] {
            for (rows, skipped) in on_workers(n, |s| {
                let rows = s
                    .read_csv::<Vec<String>>(&path, header, OnMalformed::Skip)
                    .unwrap()
                    .collect_all()
                    .unwrap();
                (rows, s.skipped_rows().unwrap())
            }) {
                assert_eq!(rows, good, "{n} workers, header {header}");
                assert_eq!(skipped, 2, "{n} workers: both ragged rows are counted once");
            }
        }
        // Too many fields fail too, on any number of workers.
        let wide: String = ragged(header).0.replace("n7,7\r\n", "n7,7,\"q,7\"\r\n");
        std::fs::write(&path, wide).unwrap();
        for n in [1, 3] {
            for err in on_workers(n, |s| {
                s.read_csv::<Vec<String>>(&path, header, OnMalformed::Fail)
                    .unwrap()
                    .collect_all()
                    .unwrap_err()
                    .to_string()
            }) {
                assert!(
                    err.contains(&format!("ragged-{header}.csv line {}", line_of(23, header))),
                    "{err}"
                );
                assert!(err.contains("expected 3 fields") && err.contains("found 4"), "{err}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
