//! The host's ledger of admitted jobs: what each job's workers on this host hold of its
//! cores and memory, kept by the kernel rather than in files. A worker's hold is a
//! listening Unix socket in the abstract namespace whose name says what it holds
//! (`heddle/admission/<millicores>/<bytes>/<rank>/<job>`): it goes when its socket is
//! closed, so a worker that exits or is killed releases its hold at once and leaves
//! nothing behind; and the abstract namespace belongs to the network namespace, which
//! is what a host is to Heddle. Holds are read from `/proc/net/unix`; who holds each is
//! asked of the kernel (`SO_PEERCRED` on a connection to it), not taken from its name.
//! Checking what is free and taking a hold happen under a lock that is itself an
//! abstract socket (`heddle/admission-lock`), released the same way.

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

const PREFIX: &str = "heddle/admission/";
const LOCK: &str = "heddle/admission-lock";
/// The longest a worker waits for the lock (holders keep it for microseconds).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Cores and memory a worker holds or asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Amount {
    pub(crate) cpus: f64,
    pub(crate) memory: u64,
}

/// One hold on this host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hold {
    pub(crate) amount: Amount,
    pub(crate) rank: usize,
    pub(crate) job: String,
    /// The holder's process and user, from the kernel.
    pub(crate) pid: i32,
    pub(crate) uid: u32,
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "job {} rank {} (pid {}, uid {}) holds {} cores and {}",
            self.job.rsplit_once('#').map_or(self.job.as_str(), |(j, _)| j),
            self.rank,
            self.pid,
            self.uid,
            self.amount.cpus,
            crate::format_bytes(self.amount.memory)
        )
    }
}

/// A worker's hold: released when dropped (or when its process ends).
#[derive(Debug)]
pub(crate) struct Held {
    _socket: UnixListener,
}

fn abstract_addr(name: &str) -> std::io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(name.as_bytes())
}

/// Names of the listening abstract sockets starting with [`PREFIX`], from `text` (the
/// contents of `/proc/net/unix`).
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // Num RefCount Protocol Flags Type St Inode Path; listening: flag 0x10000,
            // state 01 (unconnected). Accepted connections carry the name too.
            let (flags, state, path) = (cols.get(3)?, cols.get(5)?, cols.get(7)?);
            let listening = u32::from_str_radix(flags, 16).is_ok_and(|f| f & 0x10000 != 0);
            let name = path.strip_prefix('@')?;
            (listening && *state == "01" && name.starts_with(PREFIX)).then(|| name.to_owned())
        })
        .collect()
}

/// What hold `name` says it is, without its holder.
fn parse(name: &str) -> Option<(Amount, usize, String)> {
    let mut parts = name.strip_prefix(PREFIX)?.splitn(4, '/');
    let millicores: u64 = parts.next()?.parse().ok()?;
    let memory: u64 = parts.next()?.parse().ok()?;
    let rank: usize = parts.next()?.parse().ok()?;
    let job = parts.next()?.to_owned();
    Some((Amount { cpus: millicores as f64 / 1000.0, memory }, rank, job))
}

/// The process and user listening on abstract socket `name`, asked of the kernel.
fn holder(name: &str) -> Option<(i32, u32)> {
    let stream = UnixStream::connect_addr(&abstract_addr(name).ok()?).ok()?;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a plain struct of the size given, filled by the kernel.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    (r == 0).then_some((cred.pid, cred.uid))
}

/// Every hold on this host whose holder still listens.
pub(crate) fn holds() -> std::io::Result<Vec<Hold>> {
    let text = std::fs::read_to_string("/proc/net/unix")?;
    Ok(listed(&text)
        .into_iter()
        .filter_map(|name| {
            let (amount, rank, job) = parse(&name)?;
            let (pid, uid) = holder(&name)?;
            Some(Hold { amount, rank, job, pid, uid })
        })
        .collect())
}

/// The host-wide lock, held while it lives.
struct Lock(#[allow(dead_code)] UnixListener);

fn lock() -> Result<Lock, String> {
    let addr = abstract_addr(LOCK).map_err(|e| format!("the admission lock's name: {e}"))?;
    let started = Instant::now();
    let mut pause = Duration::from_micros(50);
    loop {
        match UnixListener::bind_addr(&addr) {
            Ok(l) => return Ok(Lock(l)),
            Err(e) if e.kind() == ErrorKind::AddrInUse => {
                if started.elapsed() > LOCK_WAIT {
                    let who = holder(LOCK)
                        .map_or("a process".into(), |(pid, uid)| format!("pid {pid} (uid {uid})"));
                    return Err(format!(
                        "the host's admission lock (abstract socket @{LOCK}) has been held by \
                         {who} for over {} s; end that process",
                        LOCK_WAIT.as_secs()
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Err(e) => return Err(format!("cannot take the host's admission lock: {e}")),
        }
    }
}

/// Takes a hold of `ask` for worker `rank` of `job` if, with every other hold on this
/// host, it stays within `capacity`; else says what is short and who holds the rest.
pub(crate) fn take(ask: Amount, capacity: Amount, rank: usize, job: &str) -> Result<Held, String> {
    let _lock = lock()?;
    let others = holds().map_err(|e| format!("cannot read /proc/net/unix: {e}"))?;
    let (cpus, memory) = others
        .iter()
        .fold((0.0, 0u64), |(c, m), h| (c + h.amount.cpus, m.saturating_add(h.amount.memory)));
    let free = Amount {
        cpus: (capacity.cpus - cpus).max(0.0),
        memory: capacity.memory.saturating_sub(memory),
    };
    if ask.cpus > free.cpus + 1e-9 || ask.memory > free.memory {
        let held: Vec<String> = others.iter().map(ToString::to_string).collect();
        return Err(format!(
            "together {} cores and {} here; the host has {} cores and {}, of which {} cores \
             and {} are free ({})",
            ask.cpus,
            crate::format_bytes(ask.memory),
            capacity.cpus,
            crate::format_bytes(capacity.memory),
            (free.cpus * 1000.0).round() / 1000.0,
            crate::format_bytes(free.memory),
            held.join("; ")
        ));
    }
    // At most 32 characters of the job's name, so that the socket's name stays within
    // the 107 bytes an abstract address holds (the amounts take at most 28 more).
    let job: String =
        job.chars().map(|c| if c.is_ascii_graphic() { c } else { '_' }).take(32).collect();
    let millicores = (ask.cpus * 1000.0).round() as u64;
    // Two workers of one job on a host never share a rank, and the pid tells apart
    // two runs given the same job name.
    let name = format!("{PREFIX}{millicores}/{}/{rank}/{job}#{}", ask.memory, std::process::id());
    let socket = abstract_addr(&name)
        .and_then(|a| UnixListener::bind_addr(&a))
        .map_err(|e| format!("cannot take a hold (@{name}): {e}"))?;
    Ok(Held { _socket: socket })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_keeps_listening_heddle_sockets_only() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000: 00000002 00000000 00010000 0001 01 1001 @heddle/admission/500/0/1/job#7\n\
            0000: 00000003 00000000 00000000 0001 03 1002 @heddle/admission/500/0/1/job#7\n\
            0000: 00000002 00000000 00010000 0001 01 1003 @other/name\n\
            0000: 00000002 00000000 00010000 0001 01 1004 /run/x.sock\n\
            0000: 00000002 00000000 00000000 0002 01 1005\n";
        assert_eq!(listed(text), vec!["heddle/admission/500/0/1/job#7".to_owned()]);
    }

    #[test]
    fn names_say_what_they_hold() {
        let (a, rank, job) = parse("heddle/admission/1500/1048576/3/run/with/slash#9").unwrap();
        assert_eq!((a.cpus, a.memory, rank, job.as_str()), (1.5, 1 << 20, 3, "run/with/slash#9"));
        assert!(parse("heddle/admission/x/1/2/j").is_none());
    }

    #[test]
    fn holds_count_until_dropped_and_the_rest_is_refused() {
        // A made-up capacity, so that other jobs on this machine do not matter much:
        // what this test holds must be seen, and released.
        let before = holds().unwrap();
        let used: f64 = before.iter().map(|h| h.amount.cpus).sum();
        let cap = Amount { cpus: used + 1.0, memory: u64::MAX };
        let job = format!("ledger-test-{}", std::process::id());
        let held = take(Amount { cpus: 0.75, memory: 1 << 20 }, cap, 0, &job).unwrap();
        let mine: Vec<Hold> =
            holds().unwrap().into_iter().filter(|h| h.job.starts_with(&job)).collect();
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert_eq!((mine[0].amount.cpus, mine[0].pid), (0.75, std::process::id() as i32));
        let refused = take(Amount { cpus: 0.5, memory: 0 }, cap, 1, &job).unwrap_err();
        assert!(refused.contains("together 0.5 cores") && refused.contains(&job), "{refused}");
        drop(held);
        assert!(holds().unwrap().iter().all(|h| !h.job.starts_with(&job)));
        let again = take(Amount { cpus: 0.5, memory: 0 }, cap, 1, &job);
        assert!(again.is_ok());
    }
}
