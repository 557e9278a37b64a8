//! The guardian: a small child of the launcher that kills every worker, and everything the
//! workers started, when the launcher dies — even by SIGKILL, when nothing of the launcher
//! runs again.
//!
//! The guardian leads a process group of its own and every worker joins it, so the
//! processes a worker starts (which inherit its group) belong to it too. The guardian then
//! waits on a pipe whose only writing end the launcher holds. The kernel closes that end
//! whatever way the launcher exits, the guardian's read returns, and it kills its whole
//! group with SIGKILL. `PR_SET_PDEATHSIG` on each worker alone would not do: it is not
//! inherited by the worker's own children.
//!
//! The guardian is forked without exec and, as the launcher may have threads, runs only
//! async-signal-safe calls (`close`, `setpgid`, `signal`, `read`, `kill`, `_exit`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// A running guardian and the process group it leads.
#[derive(Debug)]
pub(crate) struct Guardian {
    pid: libc::pid_t,
    /// The writing end of the guardian's pipe: closing it (by any exit) fires the guardian.
    _alive: OwnedFd,
    finished: bool,
}

impl Guardian {
    /// Forks the guardian.
    pub(crate) fn start() -> io::Result<Guardian> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (read_end, write_end) = (fds[0], fds[1]);
        // SAFETY: the child runs only async-signal-safe calls and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: both descriptors are ours and open.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            return Err(e);
        }
        if pid == 0 {
            // SAFETY: async-signal-safe calls only; never returns.
            unsafe { guard(read_end, write_end) }
        }
        // SAFETY: the read end is ours and open; the write end becomes owned.
        unsafe {
            libc::close(read_end);
            // Both sides set the group, so it exists before the first worker joins it.
            libc::setpgid(pid, pid);
        }
        // SAFETY: write_end is an open descriptor nothing else owns.
        let alive = unsafe { OwnedFd::from_raw_fd(write_end) };
        Ok(Guardian { pid, _alive: alive, finished: false })
    }

    /// The process group workers join.
    pub(crate) fn group(&self) -> libc::pid_t {
        self.pid
    }

    /// Makes `cmd`'s process join the guardian's group, and die with the launcher.
    pub(crate) fn adopt(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        let group = self.group();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, group) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
                Ok(())
            });
        }
    }

    /// Sends `sig` to the whole group (the guardian ignores SIGTERM, SIGINT and SIGHUP).
    pub(crate) fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own process group.
        unsafe { libc::kill(-self.pid, sig) };
    }

    /// Kills whatever is left of the group (processes the workers started, and the
    /// guardian) and reaps the guardian.
    pub(crate) fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        self.signal(libc::SIGKILL);
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The guardian's life: wait until the launcher's end of the pipe closes, then kill the
/// group.
///
/// # Safety
/// Only in a freshly forked child.
unsafe fn guard(read_end: libc::c_int, write_end: libc::c_int) -> ! {
    libc::close(write_end);
    libc::setpgid(0, 0);
    // The launcher stops workers by signalling the group: that must not stop the guardian.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        libc::signal(sig, libc::SIG_IGN);
    }
    let mut byte = 0u8;
    loop {
        let n = libc::read(read_end, (&mut byte as *mut u8).cast(), 1);
        if n < 0 && *libc::__errno_location() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
    }
    libc::kill(0, libc::SIGKILL);
    libc::_exit(0)
}
