//! A worker's output reaches the terminal whole, prefixed with its rank, and a line
//! without a newline longer than 1 MiB is passed on in pieces of 1 MiB (the launcher never
//! holds more), each but the last marked as continued.

mod common;

use std::time::Duration;

use common::{assert_no_survivors, command, marker, text};

#[test]
fn a_5_mb_line_without_newline_arrives_whole_in_marked_pieces() {
    let mark = marker("long-line");
    let child = command(
        &mark,
        &["run", "-n", "1", "--", "sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x"],
    )
    .spawn()
    .expect("spawn heddle");
    // Read the output while it runs (5 MB do not fit a pipe), and never wait forever.
    let pid = child.id() as i32;
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        // SAFETY: signalling the child of this test, if it is still there.
        unsafe { libc_kill(pid, 9) };
    });
    let out = child.wait_with_output().expect("output");
    drop(watchdog);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let pieces: Vec<&str> = stdout.lines().collect();
    assert_eq!(pieces.len(), 5, "5 MB in pieces of 1 MiB");
    let mut whole = String::new();
    for (i, p) in pieces.iter().enumerate() {
        let body = p.strip_prefix("[0] ").expect("every piece carries the rank");
        let body = if i < 4 {
            body.strip_suffix(" [heddle: line continues]").expect("a marked piece")
        } else {
            body
        };
        assert!(body.len() <= 1 << 20);
        whole.push_str(body);
    }
    assert_eq!(whole.len(), 5_000_000);
    assert!(whole.bytes().all(|b| b == b'x'));
    assert_no_survivors(&mark);
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
