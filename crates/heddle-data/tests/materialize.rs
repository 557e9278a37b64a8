//! Multi-stage batch resume: a job whose first stage (a keyed count) is materialized, and
//! whose second stage fails the first time, is run again: it reads the first stage's
//! files instead of computing it (its map runs zero times) and ends with the result of a
//! plain count. A directory holding another record type is refused.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::on_workers;

fn words(i: u64) -> String {
    format!("w{}", (i * i + 3 * i) % 23)
}

#[test]
fn a_failed_job_resumes_from_its_materialized_stage() {
    let root = std::env::temp_dir().join(format!("heddle-materialize-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let stage = root.join("counts");
    let mapped = Arc::new(AtomicU64::new(0));
    let run = |fail: bool| {
        on_workers(3, |s| {
            let m = mapped.clone();
            let counts = s
                .range(0, 3000)
                .map(move |i| {
                    m.fetch_add(1, Ordering::Relaxed);
                    (words(i), 1u64)
                })
                .reduce_by_key(|a, b| a + b)
                .materialize(&stage)?;
            let doubled = counts.map(|(w, n)| (w, n * 2));
            // The second stage fails on its first run.
            doubled.for_each(move |_, (w, _)| match fail && w == "w0" {
                true => Err(heddle_data::Error::InvalidArgument("an injected failure".into())),
                false => Ok(()),
            })?;
            doubled.collect_all()
        })
    };
    let first = run(true);
    let errs: Vec<String> =
        first.iter().map(|r| format!("{:?}", r.as_ref().map(Vec::len))).collect();
    assert!(first.iter().all(Result::is_err), "the first run must fail in stage 2: {errs:?}");
    assert_eq!(mapped.load(Ordering::Relaxed), 3000, "stage 1 ran once over every record");
    let results = run(false);
    assert_eq!(mapped.load(Ordering::Relaxed), 3000, "stage 1 was computed again");
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..3000 {
        *want.entry(words(i)).or_default() += 2;
    }
    for r in results {
        let got: BTreeMap<String, u64> = r.expect("the resumed run").into_iter().collect();
        assert_eq!(got, want);
    }
    let refused = on_workers(3, |s| s.range(0, 5).materialize(&stage).map(|_| ()));
    for r in refused {
        let e = r.expect_err("another record type").to_string();
        assert!(e.contains("holds a materialized data set of (alloc::string::String, u64)"), "{e}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}
