//! Bad `HEDDLE_*` settings are refused at start, naming the variable, the value and the
//! valid range: by `heddle run` before it starts any worker, and by a program started
//! without it (a world of one).

mod common;

use common::{command, example, marker, text, wait_bounded};
use std::time::Duration;

const BAD: &[(&str, &str)] = &[
    ("HEDDLE_TIMEOUT_S", "0"),
    ("HEDDLE_TIMEOUT_S", "-1"),
    ("HEDDLE_TIMEOUT_S", "nan"),
    ("HEDDLE_TIMEOUT_S", "inf"),
    ("HEDDLE_TIMEOUT_S", "abc"),
    ("HEDDLE_WINDOW", "1e8"),
    ("HEDDLE_BUFFER_BYTES", "12"),
    ("HEDDLE_INIT_TIMEOUT_S", "-5"),
    ("HEDDLE_SPIN_POLLS", "-1"),
    ("HEDDLE_TASK_THREADS", "0"),
];

#[test]
fn heddle_run_refuses_bad_settings_before_starting_workers() {
    for (var, value) in BAD {
        let mark = marker("settings");
        let mut cmd = command(&mark, &["run", "-n", "2", "--", "sh", "-c", "echo started"]);
        cmd.env(var, value);
        let out = wait_bounded(cmd.spawn().expect("spawn heddle"), Duration::from_secs(30));
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {stderr}");
        assert!(
            stderr.contains(&format!("{var}={value:?} is not valid")) && stderr.contains(" from "),
            "{var}={value}: {stderr}"
        );
        assert!(!stdout.contains("started"), "{var}={value}: a worker was started");
    }
    let mark = marker("settings-flag");
    let out = wait_bounded(
        command(&mark, &["run", "-n", "1", "--init-timeout", "nan", "--", "true"]).spawn().unwrap(),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--init-timeout"), "{}", text(&out.stderr));
    for bad in ["soon", "-1"] {
        let mark = marker("settings-align");
        let args = ["run", "-n", "1", "--alignment-timeout", bad, "--", "true"];
        let out = wait_bounded(command(&mark, &args).spawn().unwrap(), Duration::from_secs(30));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("--alignment-timeout")
                && stderr.contains("HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S"),
            "{stderr}"
        );
    }
}

#[test]
fn a_world_of_one_refuses_bad_settings_too() {
    for (var, value) in [("HEDDLE_WINDOW", "1e8"), ("HEDDLE_TIMEOUT_S", "inf")] {
        let out = std::process::Command::new(example("collectives"))
            .env(var, value)
            .output()
            .expect("run the example");
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{var}={value}");
        assert!(
            stderr.contains(&format!("{var}={value:?} is not valid")),
            "{var}={value}: {stderr}"
        );
    }
}
