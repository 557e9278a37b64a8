//! The fork rings, both ways.

use super::*;

/// A forked child echoes 200 KiB through 4 KiB rings (each wraps 50 times, both
/// sides sleeping on the doorbell in turn) and exits: the parent's read then ends, and
/// no file is left.
#[test]
fn fork_rings_carry_a_stream_both_ways_and_end_with_the_child() {
    let rings = ForkRings::new(4096).unwrap();
    let data: Vec<u8> = (0..200 << 10).map(|i: u32| (i * 7 % 251) as u8).collect();
    // SAFETY: the child only uses the rings (no lock another thread holds) and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: getppid reads.
        let (mut r, mut w) = rings.child(unsafe { libc::getppid() } as u32);
        let mut buf = vec![0u8; 1000];
        let code = loop {
            match r.read(&mut buf) {
                Ok(0) => break 0,
                Ok(n) if w.write_all(&buf[..n]).is_ok() => {}
                _ => break 1,
            }
        };
        // SAFETY: leaves without the test harness's destructors.
        unsafe { libc::_exit(code) };
    }
    let (mut r, mut w) = rings.parent(pid as u32);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        r.read_to_end(&mut got).map(|_| got)
    });
    w.write_all(&data).unwrap();
    drop(w); // the child's read ends, and it exits
    let got = reader.join().unwrap().unwrap();
    assert!(got == data, "{} bytes back of {}", got.len(), data.len());
    let mut status = 0;
    // SAFETY: our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(libc::WEXITSTATUS(status), 0);
    // Nothing of this process's is left where the rings were made.
    let ours = format!("{}{}-", heddle_comm::scratch::SCRATCH_PREFIX, std::process::id());
    let root = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let left: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&ours))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
