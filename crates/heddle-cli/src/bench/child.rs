//! Running one child process with its stdout captured line by line and a time limit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::record::parse_line;

/// How long to wait for the processes that a run leaves holding its stdout after it exits.
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long a timed-out run gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Output of [`run_captured`].
#[derive(Debug)]
pub(crate) struct Captured {
    /// How the child ended (killed, when it timed out).
    pub(crate) status: ExitStatus,
    /// Every line it printed on stdout, in order.
    pub(crate) lines: Vec<String>,
    /// Whether it ran past the time limit and was stopped.
    pub(crate) timed_out: bool,
}

/// Runs `cmd` with stdout captured line by line (stderr inherited, stdin closed), killing it
/// (SIGTERM, then SIGKILL) after `timeout`. With `echo`, stdout lines that are not measurement
/// records are copied to stderr as they come.
pub(crate) fn run_captured(
    cmd: &mut Command,
    timeout: Duration,
    echo: bool,
) -> std::io::Result<Captured> {
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if echo && parse_line(&line).is_none() {
                eprintln!("{line}");
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let start = Instant::now();
    let mut lines = Vec::new();
    let mut timed_out = false;
    let status = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Stdout closed but the process has not exited yet: poll without spinning.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(50))
            }
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            break terminate(&mut child)?;
        }
    };
    // The output may still be in the pipe; stop waiting if a stray grandchild keeps it open.
    let deadline = Instant::now() + DRAIN_GRACE;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    Ok(Captured { status, lines, timed_out })
}

/// SIGTERM (so that `heddle run` and `mpirun` stop their workers), then SIGKILL after a grace.
fn terminate(child: &mut Child) -> std::io::Result<ExitStatus> {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: plain kill(2) on our own child, which has not been reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    child.wait()
}

/// `cmd` as one line: the program and its arguments, separated by spaces (not quoted).
pub(super) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}
