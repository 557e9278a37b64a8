//! `heddle run --config FILE` (and `HEDDLE_CONFIG`): the file's options are defaults the
//! command line overrides, its `[settings]` reach the workers unless the environment has
//! them, its `[resources]` are the contract of tasks that declare none; mistakes stop the
//! run before anything starts (exit status 2), naming the file, the line and the key.

mod common;

use std::path::PathBuf;

use common::{assert_no_survivors, example, marker, run, text};

fn config(test: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heddle-config-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("job.toml");
    std::fs::write(&path, body).unwrap();
    path
}

const FAILING_TWICE: &str = "workers = 3\nrestarts = 2\n\n[settings]\nHEDDLE_TIMEOUT_S = 77\n";

fn faults(mark: &str, before: &[&str]) -> (Option<i32>, String, String) {
    let faults = example("worker_faults");
    let mut args = vec!["run"];
    args.extend_from_slice(before);
    args.extend(["--", &faults, "--fail-rank", "1", "--exit-code", "3", "--fail-attempts", "2"]);
    let (out, _) = run(mark, &args);
    assert_no_survivors(mark);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn the_files_options_apply_and_the_command_line_wins() {
    let path = config("options", FAILING_TWICE);
    let p = path.to_str().unwrap();
    // 3 workers, restarted twice: the third attempt succeeds.
    let (code, stdout, stderr) = faults(&marker("cfg-ok"), &["--config", p]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("[2] rank 2 of 3 joined (attempt 2)"), "{stdout}");
    // --restarts 0 on the command line beats the file's 2.
    let (code, _, stderr) = faults(&marker("cfg-cli"), &["--config", p, "--restarts", "0"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(!stderr.contains("restarting"), "{stderr}");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn settings_and_resources_reach_the_workers_unless_the_environment_has_them() {
    let path = config("settings", &format!("{FAILING_TWICE}[resources]\nmemory = \"200MiB\"\n"));
    let show = "echo \"$HEDDLE_TIMEOUT_S $HEDDLE_TASK_MEMORY\"";
    let mark = marker("cfg-env");
    let (out, _) = run(&mark, &["run", "--config", path.to_str().unwrap(), "--", "sh", "-c", show]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for rank in 0..3 {
        assert!(stdout.contains(&format!("[{rank}] 77 200MiB")), "{stdout}");
    }
    // HEDDLE_CONFIG names the file; a setting in the environment wins over the file's.
    let mut cmd = common::command(&mark, &["run", "--", "sh", "-c", show]);
    let out = cmd.env("HEDDLE_CONFIG", &path).env("HEDDLE_TIMEOUT_S", "55").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("[2] 55 200MiB"), "{}", text(&out.stdout));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn the_files_resources_are_the_contract_of_tasks_that_declare_none() {
    // `isolation` is for isolated vertices only: the data API's word count still runs.
    let path = config("resources", "[resources]\nmemory = \"64MiB\"\nisolation = \"process\"\n");
    let limits = example("resource_limits");
    let mark = marker("cfg-res");
    let p = path.to_str().unwrap();
    let (out, _) = run(&mark, &["run", "--config", p, "--", &limits, "--allocate", "16MiB"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"task_memory\":67108864"), "{}", text(&out.stdout));
    let (out, _) = run(&mark, &["run", "--config", p, "--", &limits, "--allocate", "1GiB"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("task hog[0]") && err.contains("memory contract of 64 MiB"), "{err}");
    let wordcount = example("wordcount");
    let (out, _) = run(&mark, &["run", "-n", "2", "--config", p, "--", &wordcount, "--generate"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn mistakes_in_the_file_stop_the_run_naming_file_line_and_key() {
    for (body, says) in [
        (
            "workers = 2\nrestart = 1\n",
            "job.toml:2: unknown option `restart`; did you mean `restarts`?",
        ),
        ("[settings]\nHEDDLE_TIMOUT_S = 5\n", "did you mean HEDDLE_TIMEOUT_S?"),
        ("[resources]\nmemory = \"12 parsecs\"\n", "[resources] memory = \"12 parsecs\": "),
        ("security = \"loud\"\n", "with the options of the config file"),
        ("workers = [\n", "job.toml:1: not a valid config file"),
    ] {
        let path = config("bad", body);
        let mark = marker("cfg-bad");
        let (out, _) = run(&mark, &["run", "--config", path.to_str().unwrap(), "--", "true"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body:?}: {err}");
        assert!(err.contains(says), "{body:?}: missing {says:?} in {err}");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
    let (out, _) =
        run(&marker("cfg-none"), &["run", "--config", "/nonexistent/job.toml", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read the config file /nonexistent/job.toml"));
}
