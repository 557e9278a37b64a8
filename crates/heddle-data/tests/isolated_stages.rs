//! A data set's record-wise stages as isolated processes (`DataSet::resources` with a
//! memory contract, or `Isolation::Process`): the same records as the same pipeline run as
//! threads and as plain Rust; each partition in a process of its own; a stage over its
//! memory contract fails the job naming the stage and the contract; a panic in the
//! process names the stage; stages that cannot run as processes are refused by name; a
//! stream's isolated stage keeps its records in order.

mod common;

use std::collections::BTreeMap;

use common::on_workers;
use heddle_data::{DataSet, Session};
use heddle_task::{Isolation, Resources};

/// Words of each number's decimal digits, counted; the middle stages under `contract`.
fn pipeline(s: &Session, contract: Option<Resources>) -> DataSet<(String, u64)> {
    let numbers = s.range(0, 20_000);
    let words =
        numbers.flat_map(|x| x.to_string().chars().map(|c| format!("d{c}")).collect::<Vec<_>>());
    let words = match &contract {
        Some(r) => words.resources(r.clone()),
        None => words,
    };
    let long = words.filter(|w| w != "d0").map(|w| (w, 1u64));
    let long = match contract {
        Some(r) => long.resources(r),
        None => long,
    };
    long.reduce_by_key(|a, b| a + b)
}

fn reference() -> BTreeMap<String, u64> {
    let mut want = BTreeMap::new();
    for x in 0..20_000u64 {
        for c in x.to_string().chars().filter(|&c| c != '0') {
            *want.entry(format!("d{c}")).or_insert(0) += 1;
        }
    }
    want
}

#[test]
fn processes_give_the_records_threads_and_plain_rust_give() {
    let contracts = [
        None,
        Some(Resources::new(0.5, 256 << 20)),
        Some(Resources::new(0.5, 0).isolation(Isolation::Process)),
        Some(Resources::new(0.5, 256 << 20).isolation(Isolation::Thread)),
    ];
    for contract in contracts {
        let got = on_workers(2, |s| pipeline(s, contract.clone()).collect().unwrap());
        let got: BTreeMap<String, u64> = got[0].clone().unwrap().into_iter().collect();
        assert_eq!(got, reference(), "with {contract:?}");
    }
}

#[test]
fn each_partition_runs_in_a_process_of_its_own() {
    let me = std::process::id();
    let runs = |r: Resources| {
        on_workers(2, |s| {
            let pids = s.range(0, 1000).map(|_| std::process::id()).resources(r.clone());
            let mut pids = pids.collect().unwrap().unwrap_or_default();
            pids.sort_unstable();
            pids.dedup();
            pids
        })
        .remove(0)
    };
    let isolated = runs(Resources::new(1.0, 128 << 20));
    assert_eq!(isolated.len(), 2, "one process per partition: {isolated:?}");
    assert!(isolated.iter().all(|&p| p != me), "{isolated:?} include the worker {me}");
    // Threads: no memory contract (Auto), or asked for.
    assert_eq!(runs(Resources::new(1.0, 0)), vec![me]);
    assert_eq!(runs(Resources::new(1.0, 128 << 20).isolation(Isolation::Thread)), vec![me]);
}

#[test]
fn a_stage_over_its_memory_contract_fails_naming_it() {
    let got = on_workers(1, |s| {
        s.range(0, 4)
            .map(|x| {
                // 256 MiB touched page by page, against a 64 MiB contract.
                let mut big = vec![0u8; 256 << 20];
                for i in (0..big.len()).step_by(4096) {
                    big[i] = 1;
                }
                x + u64::from(big[4096 * 7])
            })
            .resources(Resources::new(1.0, 64 << 20))
            .collect()
    });
    let err = got[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("map"), "{err}");
    assert!(err.contains("exceeded its memory contract of 64 MiB"), "{err}");
}

#[test]
fn a_panic_in_the_process_names_the_stage() {
    let got = on_workers(1, |s| {
        s.range(0, 10)
            .map(|x| {
                assert!(x != 7, "record 7 is poison");
                x
            })
            .resources(Resources::new(1.0, 0).isolation(Isolation::Process))
            .collect()
    });
    let err = got[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("map") && err.contains("record 7 is poison"), "{err}");
}

#[test]
fn stages_that_cannot_run_as_processes_are_refused_by_name() {
    let process = Resources::new(1.0, 0).isolation(Isolation::Process);
    let got = on_workers(1, |s| {
        let source = s.range(0, 10).resources(process.clone()).collect().map(drop);
        let a = s.range(0, 10);
        let union = a.union(&a).resources(process.clone()).collect().map(drop);
        (source, union)
    });
    let (source, union) = &got[0];
    for (err, stage) in [(source, "range"), (union, "union")] {
        let err = err.as_ref().unwrap_err().to_string();
        assert!(err.contains(stage) && err.contains("isolated process"), "{err}");
    }
}

#[test]
fn a_streams_isolated_stage_keeps_order() {
    let s = Session::new(heddle_comm::solo(Default::default()).unwrap())
        .unwrap()
        .with_partitions(1)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let doubled = s.stream_generate(None, Some(5_000), |i| i).map(|x| x * 2);
    let doubled = doubled.resources(Resources::new(0.5, 128 << 20));
    let send = move |_: u32, x| {
        tx.send(x).expect("receiver open");
        Ok(())
    };
    doubled.run(send, None).unwrap();
    let got: Vec<u64> = rx.try_iter().collect();
    assert_eq!(got, (0..5_000u64).map(|x| x * 2).collect::<Vec<_>>());
}
