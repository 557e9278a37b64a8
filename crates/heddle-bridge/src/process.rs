//! The filter's process: started with the bridge's environment, its standard error kept
//! (last lines) and forwarded, killed with its parent, stopped with SIGTERM then SIGKILL.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// Lines of standard error kept for error messages.
const TAIL_LINES: usize = 20;

/// The program a bridge runs: a program, its arguments and extra environment. Unlike
/// `std::process::Command` it can be cloned, so every instance (and every restart) runs
/// the same thing.
///
/// ```
/// use heddle_bridge::FilterCommand;
/// let c = FilterCommand::new("python3").arg("-m").arg("my_filter").env("MODE", "fast");
/// assert_eq!(c.to_string(), "python3 -m my_filter");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterCommand {
    program: String,
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

impl FilterCommand {
    /// A command running `program` (found on `PATH` if it has no slash).
    pub fn new(program: impl Into<String>) -> FilterCommand {
        FilterCommand { program: program.into(), args: Vec::new(), envs: Vec::new() }
    }

    /// Splits a shell-like command line on whitespace (no quoting): `"prog --x 1"`.
    ///
    /// # Errors
    /// [`Error::Config`] for an empty line.
    pub fn parse(line: &str) -> Result<FilterCommand> {
        let mut words = line.split_whitespace();
        let program =
            words.next().ok_or_else(|| Error::Config("an empty filter command".into()))?;
        Ok(FilterCommand::new(program).args(words))
    }

    /// Adds an argument.
    #[must_use]
    pub fn arg(mut self, a: impl Into<String>) -> FilterCommand {
        self.args.push(a.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, a: I) -> FilterCommand {
        self.args.extend(a.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the filter.
    #[must_use]
    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> FilterCommand {
        self.envs.push((k.into(), v.into()));
        self
    }
}

impl std::fmt::Display for FilterCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.program)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// Secrets of the job a worker holds in its environment: a filter (often another
/// party's program) does not inherit them, so it cannot join the job or read its
/// dashboard. A filter that needs one is given it by [`FilterCommand::env`].
const WITHHELD_ENV: &[&str] =
    &["HEDDLE_JOB_TOKEN", "HEDDLE_JOB_TOKEN_FILE", "HEDDLE_DASHBOARD_TOKEN"];

/// The process to start: `cmd` with the worker's environment less [`WITHHELD_ENV`], then
/// the command's own variables, then the bridge's (`env`); standard streams piped.
fn command(cmd: &FilterCommand, env: &[(&str, String)]) -> Command {
    let mut c = Command::new(&cmd.program);
    c.args(&cmd.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for k in WITHHELD_ENV {
        c.env_remove(k);
    }
    c.envs(cmd.envs.iter().map(|(k, v)| (k, v)));
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// A running filter process.
#[derive(Debug)]
pub(crate) struct FilterProcess {
    child: Child,
    tail: Arc<Mutex<VecDeque<String>>>,
    status: Option<ExitStatus>,
}

impl FilterProcess {
    /// Starts `cmd` with the bridge variables, its standard streams piped.
    pub(crate) fn spawn(
        cmd: &FilterCommand,
        task: &str,
        env: &[(&str, String)],
    ) -> Result<(FilterProcess, ChildStdin, ChildStdout)> {
        let mut c = command(cmd, env);
        // SAFETY: prctl is async-signal-safe; the filter dies with the thread of its parent
        // that started it, so a killed worker leaves no orphan.
        unsafe {
            c.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = c.spawn().map_err(|source| Error::Spawn {
            task: task.to_owned(),
            command: cmd.to_string(),
            hint: if source.kind() == std::io::ErrorKind::NotFound {
                "; check the program's name and PATH"
            } else {
                ""
            },
            source,
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Error::Config("the filter's standard streams were not piped".into()));
        };
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let keep = Arc::clone(&tail);
        let prefix = format!("[{task}] ");
        std::thread::Builder::new()
            .name(format!("bridge-stderr-{task}"))
            .spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let _ = writeln!(std::io::stderr().lock(), "{prefix}{line}");
                    let mut t = keep.lock().unwrap_or_else(PoisonError::into_inner);
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            })
            .map_err(|e| Error::io("starting the filter's stderr reader", e))?;
        Ok((FilterProcess { child, tail, status: None }, stdin, stdout))
    }

    /// The process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status, if it has exited.
    pub(crate) fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits up to `limit` for it to exit.
    pub(crate) fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_status() {
                return Some(s);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stops it: SIGTERM, then SIGKILL after `grace`; waits for it.
    pub(crate) fn stop(&mut self, grace: Duration) -> ExitStatus {
        if let Some(s) = self.try_status() {
            return s;
        }
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        if let Some(s) = self.wait_for(grace) {
            return s;
        }
        let _ = self.child.kill();
        let s = self.child.wait().unwrap_or_else(|_| ExitStatus::from_raw(9));
        self.status = Some(s);
        s
    }

    /// "exited with status 2", "was killed by signal 9 (SIGKILL)" or "is still running".
    pub(crate) fn describe_exit(&mut self) -> String {
        match self.try_status() {
            None => "is still running".into(),
            Some(s) => describe(s),
        }
    }

    /// The last lines of its standard error (waiting briefly for the reader to catch up).
    pub(crate) fn stderr_tail(&self) -> String {
        std::thread::sleep(Duration::from_millis(20));
        let t = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        t.iter().map(|l| format!("  {l}\n")).collect()
    }
}

impl Drop for FilterProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn describe(s: ExitStatus) -> String {
    if let Some(code) = s.code() {
        return format!("exited with status {code}");
    }
    let sig = s.signal().unwrap_or(0);
    let name = match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    };
    format!("was killed by signal {sig} ({name})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn a_filter_inherits_no_job_secret_but_gets_what_it_is_given() {
        let cmd = FilterCommand::new("prog").env("MODE", "fast").env("HEDDLE_DASHBOARD_TOKEN", "d");
        let c = command(&cmd, &[("HEDDLE_BRIDGE_TOKEN", "t".to_owned())]);
        let envs: Vec<(&OsStr, Option<&OsStr>)> = c.get_envs().collect();
        let get = |k: &str| envs.iter().find(|(n, _)| *n == OsStr::new(k)).map(|(_, v)| *v);
        assert_eq!(get("HEDDLE_JOB_TOKEN"), Some(None), "removed");
        assert_eq!(get("HEDDLE_JOB_TOKEN_FILE"), Some(None), "removed");
        assert_eq!(get("HEDDLE_DASHBOARD_TOKEN"), Some(Some(OsStr::new("d"))), "given back");
        assert_eq!(get("MODE"), Some(Some(OsStr::new("fast"))));
        assert_eq!(get("HEDDLE_BRIDGE_TOKEN"), Some(Some(OsStr::new("t"))));
    }
}
