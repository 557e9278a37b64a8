//! `heddle::futures` on worlds of 1 to 4 ranks in this process: results against sums and
//! maps computed here, chunked maps, a panicking task, registries that differ, another
//! root, and a root whose own code fails (the workers must still stop).

use heddle::futures::{self, Error, Registry, TaskFn};
use heddle::{local_world, CommConfig, Communicator};

struct Tasks {
    registry: Registry,
    square: TaskFn<u64, u64>,
    words: TaskFn<String, Vec<String>>,
    fail: TaskFn<u32, u32>,
}

fn tasks() -> Tasks {
    let mut registry = Registry::new();
    let square = registry.register("square", |x: u64| x * x);
    let words = registry.register("words", |line: String| {
        line.split_whitespace().map(str::to_uppercase).collect::<Vec<_>>()
    });
    let fail = registry.register("fail", |x: u32| {
        assert!(x != 13, "thirteen is unlucky");
        x + 1
    });
    Tasks { registry, square, words, fail }
}

fn on_every_rank<R: Send>(n: usize, f: impl Fn(&Communicator) -> R + Sync) -> Vec<R> {
    let comms = local_world(n, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = comms.iter().map(|c| s.spawn(|| f(c))).collect();
        handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
    })
}

#[test]
fn submitted_tasks_and_maps_give_what_a_sequential_run_gives() {
    for n in 1..=4 {
        let out = on_every_rank(n, |c| {
            let t = tasks();
            futures::run(c, 0, &t.registry, |ex| -> Result<_, Error> {
                assert_eq!(ex.workers(), n - 1);
                let fs = (0..10_000u64)
                    .map(|i| ex.submit(t.square, i))
                    .collect::<Result<Vec<_>, _>>()?;
                let sum: u64 = fs.into_iter().map(|f| f.wait()).sum::<Result<u64, _>>()?;
                let lines: Vec<String> = (0..500).map(|i| format!("line {i} of  text ")).collect();
                let mut maps = Vec::new();
                for chunk in [1, 7, 1000] {
                    maps.push(ex.map(t.words, lines.clone(), chunk)?);
                }
                Ok((sum, maps, lines))
            })
            .unwrap()
        });
        let (sum, maps, lines) = out[0].clone().expect("the root has the result");
        assert_eq!(sum, (0..10_000u64).map(|i| i * i).sum::<u64>(), "{n} ranks");
        let want: Vec<Vec<String>> =
            lines.iter().map(|l| l.split_whitespace().map(str::to_uppercase).collect()).collect();
        for m in maps {
            assert_eq!(m, want);
        }
        assert!(out[1..].iter().all(Option::is_none), "workers return None");
    }
}

#[test]
fn a_panicking_task_fails_its_future_naming_it_and_the_rest_go_on() {
    let out = on_every_rank(3, |c| {
        let t = tasks();
        futures::run(c, 2, &t.registry, |ex| -> Result<_, Error> {
            let fs = (10..20u32).map(|i| ex.submit(t.fail, i)).collect::<Result<Vec<_>, _>>()?;
            let results: Vec<Result<u32, String>> =
                fs.into_iter().map(|f| f.wait().map_err(|e| e.to_string())).collect();
            let after = ex.submit(t.square, 9)?.wait()?;
            Ok((results, after))
        })
        .unwrap()
    });
    let (results, after) = out[2].as_ref().expect("rank 2 is the root");
    assert_eq!(*after, 81);
    for (i, r) in (10..20u32).zip(results) {
        match r {
            Ok(v) => assert_eq!(*v, i + 1),
            Err(e) => {
                assert_eq!(i, 13, "{e}");
                assert!(e.starts_with("task fail (id 4) panicked on rank "), "{e}");
                assert!(e.ends_with(": thirteen is unlucky"), "{e}");
            }
        }
    }
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
}

#[test]
fn registries_that_differ_fail_on_every_rank() {
    let out = on_every_rank(3, |c| {
        let mut registry = Registry::new();
        let name = if c.rank() == 1 { "cube" } else { "square" };
        let _ = registry.register(name, |x: u64| x);
        futures::run(c, 0, &registry, |_| Ok::<_, Error>(())).map_err(|e| e.to_string())
    });
    for r in out {
        let e = r.unwrap_err();
        assert!(e.contains("the root registered [square]") && e.contains("the same way"), "{e}");
    }
}

#[test]
fn a_failing_root_still_stops_its_workers() {
    let out = on_every_rank(3, |c| {
        let t = tasks();
        futures::run(c, 0, &t.registry, |ex| -> Result<(), Error> {
            let _pending = ex.submit(t.square, 3)?;
            Err(Error::Invalid("the root gave up".into()))
        })
        .map_err(|e| e.to_string())
    });
    assert_eq!(out[0], Err("the root gave up".to_string()));
    assert_eq!(out[1], Ok(None));
    assert_eq!(out[2], Ok(None));
}
