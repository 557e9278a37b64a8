//! SLAM against the simulator's truth: the estimated path stays close to the true one
//! while dead reckoning drifts away, the map's walls are the world's walls, the answer
//! does not depend on how many workers share the particles' work in kind, and bad
//! settings are refused naming the setting.

use heddle_apps::slam::{slam, Feed, Options, Run, Simulator, World};
use heddle_comm::{local_world, CommConfig};

/// Runs `opts` on `workers` threads of one process; worker 0's run.
fn run(workers: usize, opts: &Options) -> Run {
    let comms = local_world(workers, CommConfig::default()).unwrap();
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> =
            comms.iter().map(|c| s.spawn(move || slam(c, opts).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    runs.into_iter().next().unwrap()
}

fn small(scans: usize) -> Options {
    Options { particles: 24, beams: 90, scans, rate_hz: 0.0, seed: 7, ..Options::default() }
}

#[test]
fn the_path_follows_the_truth_where_dead_reckoning_drifts() {
    for workers in [1, 3] {
        let r = run(workers, &small(120));
        assert_eq!((r.poses.len(), r.truth.len(), r.latencies.len()), (120, 120, 120));
        assert!(r.rmse_m < 0.15, "{workers} workers: RMSE {} m", r.rmse_m);
        assert!(
            r.rmse_m * 5.0 < r.odometry_rmse_m,
            "{workers} workers: RMSE {} m against dead reckoning's {} m",
            r.rmse_m,
            r.odometry_rmse_m
        );
        // Every estimate, not only on average: no scan more than half a metre off.
        let worst = r
            .poses
            .iter()
            .zip(&r.truth)
            .map(|(a, b)| (a.x - b.x).hypot(a.y - b.y))
            .fold(0.0, f64::max);
        assert!(worst < 0.5, "{workers} workers: an estimate {worst} m off");
    }
}

#[test]
fn the_map_holds_the_worlds_walls() {
    let opts = small(100);
    let r = run(2, &opts);
    let map = r.map.expect("worker 0 holds the best map");
    let world = World::generate(opts.seed);
    let n = world.cells_per_side();
    let res = 12.0 / n as f64;
    let (mut walls, mut right) = (0, 0);
    for j in 0..n {
        for i in 0..n {
            let (x, y) = ((i as f64 + 0.5) * res, (j as f64 + 0.5) * res);
            if map.wall(x, y) {
                walls += 1;
                // Right within a cell of a true wall.
                let near = (-1..=1).any(|dj| {
                    (-1..=1).any(|di| world.occupied(x + di as f64 * res, y + dj as f64 * res))
                });
                right += usize::from(near);
            }
        }
    }
    assert!(walls > 300, "only {walls} wall cells mapped");
    assert!(right * 100 >= walls * 95, "{right} of {walls} mapped wall cells are walls");
}

#[test]
fn resampling_moves_maps_between_workers() {
    // Few particles and a long drive: the weights grow uneven and the filter resamples,
    // maps crossing workers; the estimate stays good through it.
    let opts = Options { particles: 6, scans: 250, ..small(0) };
    let r = run(3, &opts);
    assert!(r.resamples > 0, "no resampling in {} scans", opts.scans);
    assert!(r.rmse_m < 0.2, "RMSE {} m after {} resamplings", r.rmse_m, r.resamples);
}

#[test]
fn lost_and_overtaken_scans_are_counted_and_the_path_holds() {
    let opts = Options { lose: 0.1, reorder: 0.1, ..small(150) };
    let r = run(2, &opts);
    // What arrived, replayed from the same seeded feed: every number once, in order of
    // arrival; a number below the highest seen so far is out of order.
    let mut feed =
        Feed::new(Simulator::new(opts.seed, opts.beams), opts.scans, 0.1, 0.1, opts.seed);
    let (mut used, mut late) = (Vec::new(), 0);
    while let Some(s) = feed.next_scan() {
        if used.last().is_some_and(|&l| s.index <= l) {
            late += 1;
        } else {
            used.push(s.index);
        }
    }
    assert_eq!(r.scans, used, "the scans used, in order");
    assert_eq!(r.out_of_order, late);
    let passed = used.last().unwrap() + 1;
    assert_eq!(
        r.missing,
        passed - used.len() - late,
        "each number up to the last used: used, late or missing"
    );
    assert!(
        late > 3 && r.missing > 3,
        "{late} late, {} missing: the feed should do both",
        r.missing
    );
    assert!(r.scans.windows(2).all(|w| w[0] < w[1]));
    assert!(r.rmse_m < 0.15 && r.rmse_m * 5.0 < r.odometry_rmse_m, "RMSE {} m", r.rmse_m);
}

#[test]
fn the_simulator_is_seeded_and_its_laser_sees_the_walls() {
    let (mut a, mut b) = (Simulator::new(3, 180), Simulator::new(3, 180));
    for _ in 0..5 {
        assert_eq!(a.next_scan(), b.next_scan());
    }
    let scan = Simulator::new(3, 180).next_scan();
    // At (2.2, 2.2) facing east: the beam to the right (south) meets the wall at y = 0.2.
    assert!((f64::from(scan.ranges[0]) - 2.0).abs() < 0.1, "{}", scan.ranges[0]);
}

#[test]
fn bad_settings_are_refused_naming_the_setting() {
    let comms = local_world(2, CommConfig::default()).unwrap();
    let cases = [
        (Options { particles: 1, ..small(5) }, "particles = 1"),
        (Options { beams: 1, ..small(5) }, "beams = 1"),
        (Options { scans: 0, ..small(5) }, "scans = 0"),
        (Options { rate_hz: -1.0, ..small(5) }, "rate = -1"),
        (Options { lose: 1.0, ..small(5) }, "lose = 1"),
    ];
    for (opts, want) in cases {
        let errs: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = comms
                .iter()
                .map(|c| {
                    let o = opts.clone();
                    s.spawn(move || slam(c, &o).unwrap_err().to_string())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for e in errs {
            assert!(e.contains(want), "{e:?} should name {want}");
        }
    }
}
