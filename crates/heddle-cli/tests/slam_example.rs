//! `examples/slam` under `heddle run`: two worker processes share the particles, worker 0
//! prints the JSON line with the error against the simulator's truth and the latencies,
//! writes the map, and the example fails (exit 1, naming the numbers) when its check does.

mod common;

use common::{assert_no_survivors, example, marker, run};

fn summary(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().find_map(|l| l.split_once("] ").map(|x| x.1)).expect("a JSON line");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn slam_on_two_workers_tracks_the_robot_and_writes_its_map() {
    let mark = marker("slam");
    let dir = std::env::temp_dir().join(format!("heddle-slam-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let map = dir.join("map.pgm");
    let program = example("slam");
    let map_arg = map.display().to_string();
    let args = [
        "run",
        "-n",
        "2",
        "--",
        &program,
        "--particles",
        "30",
        "--beams",
        "180",
        "--scans",
        "80",
        "--rate",
        "40",
        "--map-pgm",
        &map_arg,
    ];
    let (out, _) = run(&mark, &args);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let s = summary(&stdout);
    assert_eq!(s["ok"], true, "{s}");
    // Scans used, lost and overtaken: none more than the 80 sent, some of each.
    let (used, missing, late) = (
        s["scans"].as_u64().unwrap(),
        s["missing"].as_u64().unwrap(),
        s["out_of_order"].as_u64().unwrap(),
    );
    assert!(used + missing + late <= 80 && used >= 60, "{s}");
    assert_eq!(s["workers"].as_u64(), Some(2), "{s}");
    let (rmse, odo) = (s["rmse_m"].as_f64().unwrap(), s["odometry_rmse_m"].as_f64().unwrap());
    assert!(rmse < 0.15 && rmse * 5.0 < odo, "RMSE {rmse} against dead reckoning {odo}");
    let p50 = s["latency_p50_ms"].as_f64().unwrap();
    assert!(p50 > 0.0 && s["latency_p99_ms"].as_f64().unwrap() >= p50, "{s}");
    let pgm = std::fs::read(&map).unwrap();
    assert!(pgm.starts_with(b"P5\n240 240\n255\n"), "a 240 × 240 PGM");
    assert_eq!(pgm.len(), 15 + 240 * 240);
    assert!(pgm[15..].iter().filter(|&&c| c == 0).count() > 300, "walls on the map");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_no_survivors(&mark);
}

#[test]
fn a_failed_check_exits_nonzero_with_the_numbers() {
    let mark = marker("slam-check");
    let program = example("slam");
    let args = [
        "run",
        "-n",
        "1",
        "--",
        &program,
        "--particles",
        "4",
        "--beams",
        "60",
        "--scans",
        "20",
        "--rate",
        "0",
        "--max-rmse",
        "0",
    ];
    let (out, _) = run(&mark, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("the estimate is off: RMSE"), "{stderr}");
    assert_no_survivors(&mark);
}
