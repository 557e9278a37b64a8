//! The launcher's standard input goes to rank 0, as `mpirun` forwards it: through a pipe
//! that a thread of the launcher fills. Rank 0 does not read the terminal itself: it runs
//! in the job's own process group, where reading a terminal would stop it (SIGTTIN).
//!
//! One thread per launcher process reads standard input, for every job it starts: the
//! bytes go to the rank 0 of the job started last (a restarted attempt's rank 0 takes over
//! from its predecessor), and its end closes that rank's pipe.

use std::io::{Read, Write};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, PoisonError};

/// The pipe of the current rank 0, if its standard input is still open.
static TARGET: Mutex<Option<ChildStdin>> = Mutex::new(None);
/// Whether the launcher's standard input has ended (later rank 0s get EOF at once).
static ENDED: AtomicBool = AtomicBool::new(false);
static READER: Once = Once::new();

/// Makes `pipe` (rank 0's standard input) receive what the launcher reads from its own.
pub(crate) fn forward_to(pipe: ChildStdin) {
    if ENDED.load(Ordering::Acquire) {
        return; // dropped: rank 0 reads EOF
    }
    *TARGET.lock().unwrap_or_else(PoisonError::into_inner) = Some(pipe);
    READER.call_once(|| {
        let started = std::thread::Builder::new().name("heddle-stdin".into()).spawn(copy_stdin);
        if let Err(e) = started {
            tracing::warn!(error = %e, "could not start the thread forwarding standard input");
        }
    });
}

fn copy_stdin() {
    let mut buf = vec![0u8; 64 << 10];
    let mut stdin = std::io::stdin().lock();
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut target = TARGET.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pipe) = target.as_mut() {
            if pipe.write_all(&buf[..n]).is_err() {
                *target = None; // rank 0 closed its end or exited
            }
        }
    }
    ENDED.store(true, Ordering::Release);
    *TARGET.lock().unwrap_or_else(PoisonError::into_inner) = None;
}
