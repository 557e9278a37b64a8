//! Jobs across hosts: three network namespaces joined by a bridge stand in for three
//! machines, two workers on each (`HEDDLE_HOST_ID` per host): shared memory inside a host,
//! TCP across, the job master listening on the bridge. The collectives, word count and
//! K-means examples check their own results; a host whose link is cut mid-job is named
//! within the heartbeat timeout, and with restarts the job recovers once the link is back.
//!
//! Needs root and iproute2 (as on this project's machines and CI); elsewhere each test
//! says loudly why it cannot run and checks nothing.

use std::time::{Duration, Instant};

mod common;

use common::net::Hosts;
use common::*;

fn hosts(count: usize) -> Option<Hosts> {
    Hosts::create_or_say_why(count)
}

/// `heddle run -n 6` with two ranks on each of three hosts.
fn run_across(h: &Hosts, mark: &str, extra: &[&str], program: &str) -> std::process::Output {
    let bind = format!("{}:0", h.bridge_ip());
    let script = h.script(2, program);
    let mut args = vec!["run", "-n", "6", "--init-timeout", "30", "--master-bind", &bind];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", &script]);
    let child = command(mark, &args).spawn().expect("run heddle");
    wait_bounded(child, Duration::from_secs(180))
}

#[test]
fn collectives_and_dataflow_across_three_hosts() {
    let Some(h) = hosts(3) else { return };
    let mark = marker("hosts3");
    let out = run_across(&h, &mark, &[], &format!("{} --elements 50000", example("collectives")));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let json = stdout.lines().find(|l| l.starts_with("[0] {\"example\"")).expect("summary line");
    assert!(json.contains("\"ok\": true") && json.contains("\"ranks\": 6"), "{json}");
    // Rank 0 shares its host with rank 1 only: the other four are across the network.
    assert!(json.contains("\"tcp_peers\": 4"), "{json}");
    for program in [
        format!("{} --generate --megabytes 8", example("wordcount")),
        format!("{} --generate --points 200000 --iterations 5", example("kmeans")),
    ] {
        let out = run_across(&h, &mark, &[], &program);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{program}: {stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("\"ok\": true"), "{program}: {stdout}");
    }
    assert_no_survivors(&mark);
}

#[test]
fn a_cut_link_names_the_host_and_the_job_recovers_when_it_returns() {
    let Some(h) = hosts(3) else { return };
    let mark = marker("linkcut");
    let program = format!("{} --sleep 6", example("worker_faults"));
    let cutter = {
        let (tag, start) = (h.tag.clone(), Instant::now());
        std::thread::spawn(move || {
            // Cut host c (ranks 4 and 5) once the job runs, for 4 seconds.
            std::thread::sleep(Duration::from_millis(2500));
            let set = |state: &str| {
                std::process::Command::new("ip")
                    .args(["link", "set", &format!("hv{tag}c"), state])
                    .status()
                    .expect("ip link set")
            };
            set("down");
            std::thread::sleep(Duration::from_secs(4));
            set("up");
            start.elapsed()
        })
    };
    let started = Instant::now();
    let out = run_across(&h, &mark, &["--heartbeat-timeout", "2", "--restarts", "2"], &program);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    cutter.join().unwrap();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The silent rank is named with its host, within the timeout of the cut.
    assert!(stderr.contains("no heartbeat for 2.0 s from rank"), "{stderr}");
    assert!(stderr.contains("on host host-3"), "{stderr}");
    assert!(stderr.contains("restarting the job: attempt 2"), "{stderr}");
    // Every rank of the attempt after the cut joined and finished.
    for r in 0..6 {
        assert!(stdout.contains(&format!("[{r}] rank {r} of 6 joined (attempt 1)")), "{stdout}");
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_no_survivors(&mark);
}

/// Plain `mpirun` across the three hosts, two slots each: its remote-shell agent enters a
/// host's namespace (as `ssh` would reach a machine) and gives that host a temporary
/// directory of its own, as separate machines have (Open MPI keys its shared-memory files
/// by host name, which the namespaces share).
fn mpirun_across(
    h: &Hosts,
    mark: &str,
    dir: &std::path::Path,
    env: &[(&str, &str)],
    program: &str,
) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nhost=$1; shift\nd={}/$host; mkdir -p -m 0700 $d\n\
             exec ip netns exec \"$host\" env HEDDLE_HOST_ID=$host TMPDIR=$d \
             OMPI_MCA_btl_vader_backing_directory=$d sh -c \"$*\"\n",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o700)).unwrap();
    let hostfile = dir.join("hosts");
    let lines: Vec<String> = (0..h.count).map(|i| format!("{} slots=2\n", h.ns(i))).collect();
    std::fs::write(&hostfile, lines.concat()).unwrap();
    let subnet = format!("10.213.{}.0/24", h.subnet);
    let mut c = std::process::Command::new("mpirun");
    c.arg("--hostfile").arg(&hostfile).args(["-n", "6", "--mca", "plm_rsh_agent"]).arg(&agent);
    c.args(["--mca", "oob_tcp_if_include", &subnet, "--mca", "btl_tcp_if_include", &subnet]);
    // Open MPI's daemons map a shared topology at a fixed address, which fails at random
    // here; they read it themselves without.
    c.args(["--mca", "rtc_hwloc_vmhole", "none"]).args(program.split(' '));
    c.env("HDTEST_MARK", mark)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    wait_bounded(
        c.spawn().expect("start mpirun (make test-deps installs it)"),
        Duration::from_secs(120),
    )
}

#[test]
fn plain_mpirun_across_three_hosts_meets_through_pmix() {
    let Some(h) = hosts(3) else { return };
    let mark = marker("mpirun-hosts");
    let dir = std::env::temp_dir().join(format!("heddle-mpirun-hosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let collectives = format!("{} --elements 50000", example("collectives"));
    // Heddle's own links (TLS across hosts): no shared directory and no HEDDLE_MASTER, so
    // every rank learns rank 0's master from the launcher's PMIx server.
    let log = [("HEDDLE_LOG", "heddle_runtime::rendezvous=debug")];
    let out = mpirun_across(&h, &mark, &dir, &log, &collectives);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let json = stdout.lines().find(|l| l.starts_with("{\"example\"")).expect("summary line");
    assert!(json.contains("\"ok\": true") && json.contains("\"ranks\": 6"), "{json}");
    assert!(json.contains("\"tcp_peers\": 4"), "{json}");
    assert_eq!(stderr.matches("rendezvous through PMIx").count(), 6, "{stderr}");
    // The MPI transport across the hosts: every link an MPI channel.
    let out = mpirun_across(&h, &mark, &dir, &[("HEDDLE_TRANSPORT", "mpi")], &collectives);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let json = stdout.lines().find(|l| l.starts_with("{\"example\"")).expect("summary line");
    assert!(json.contains("\"ok\": true") && json.contains("\"tcp_peers\": 0"), "{json}");
    // Rank 0 starts two seconds late: the others ask the servers before the key exists and
    // must keep waiting for it (a server may answer "not found" at once rather than wait).
    let late = dir.join("late.sh");
    std::fs::write(
        &late,
        format!("#!/bin/sh\n[ \"$OMPI_COMM_WORLD_RANK\" = 0 ] && sleep 2\nexec {collectives}\n"),
    )
    .unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o700);
    std::fs::set_permissions(&late, mode).unwrap();
    let out = mpirun_across(&h, &mark, &dir, &[], late.to_str().unwrap());
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("\"ok\": true"), "{stdout}");
    assert_no_survivors(&mark);
    std::fs::remove_dir_all(&dir).unwrap();
}
