//! Worker output as the launcher passes it on: line by line, each line prefixed with the
//! worker's rank, and a line longer than [`MAX_LINE`] split into pieces of that size, each
//! but the last ending with [`CONTINUED`] — so a worker printing 100 MB without a newline
//! costs the launcher at most one piece of memory, and nothing is lost.

use std::io::{self, BufRead, BufReader, Read, Write};

/// The longest piece of a line passed on at once.
pub(crate) const MAX_LINE: usize = 1 << 20;
/// Ends a piece of a longer line (the line goes on in the next piece).
pub(crate) const CONTINUED: &[u8] = b" [heddle: line continues]";

/// Copies `input` to `out` line by line, each prefixed with `prefix`, splitting lines longer
/// than `max` bytes; returns when `input` ends. A write error (a closed terminal) drops the
/// output but keeps reading, so the worker is never blocked on a full pipe.
pub(crate) fn copy_lines(
    input: impl Read,
    prefix: &[u8],
    max: usize,
    mut out: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(64 << 10, input);
    let mut line: Vec<u8> = Vec::with_capacity(prefix.len() + 256);
    line.extend_from_slice(prefix);
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            if line.len() > prefix.len() {
                line.push(b'\n');
                let _ = out(&line);
            }
            return Ok(());
        }
        let room = max - (line.len() - prefix.len());
        // A newline right after a full piece still ends the line there.
        let (take, full) = match chunk.iter().take(room + 1).position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (chunk.len().min(room), false),
        };
        line.extend_from_slice(&chunk[..take]);
        reader.consume(take);
        let piece_full = line.len() - prefix.len() >= max;
        if full || piece_full {
            if !full {
                line.extend_from_slice(CONTINUED);
                line.push(b'\n');
            }
            let _ = out(&line);
            line.truncate(prefix.len());
        }
    }
}

/// [`copy_lines`] to this process's stdout or stderr.
pub(crate) fn forward(input: impl Read, rank: usize, is_err: bool) {
    let prefix = format!("[{rank}] ").into_bytes();
    let observed = crate::observatory::global();
    let _ = copy_lines(input, &prefix, MAX_LINE, |line| {
        observed.log(rank, is_err, &line[prefix.len()..]);
        crate::progress::around(|| {
            if is_err {
                io::stderr().lock().write_all(line)
            } else {
                io::stdout().lock().write_all(line)
            }
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copied(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        copy_lines(input, b"[3] ", max, |l| {
            lines.push(l.to_vec());
            Ok(())
        })
        .unwrap();
        lines
    }

    #[test]
    fn long_lines_are_split_with_a_marker_and_nothing_is_lost() {
        let long: Vec<u8> = (0..3 * MAX_LINE + 17).map(|i| b'a' + (i % 26) as u8).collect();
        let mut input = b"short\n\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nlast without newline");
        let lines = copied(&input, MAX_LINE);
        assert_eq!(lines[0], b"[3] short\n");
        assert_eq!(lines[1], b"[3] \n");
        assert_eq!(lines.len(), 2 + 4 + 1);
        let mut rebuilt = Vec::new();
        for piece in &lines[2..6] {
            assert!(
                piece.len() <= 4 + MAX_LINE + CONTINUED.len() + 1,
                "a piece of {} bytes",
                piece.len()
            );
            let body = piece.strip_prefix(b"[3] ").unwrap().strip_suffix(b"\n").unwrap();
            rebuilt.extend_from_slice(body.strip_suffix(CONTINUED).unwrap_or(body));
        }
        assert_eq!(rebuilt, long);
        assert_eq!(lines[6], b"[3] last without newline\n");
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_not_split() {
        let mut input = vec![b'x'; 100];
        input.push(b'\n');
        assert_eq!(copied(&input, 100), vec![[&b"[3] "[..], &input].concat()]);
        let lines = copied(&[b'y'; 250], 100);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with(b"continues]\n") && lines[1].ends_with(b"continues]\n"));
        assert_eq!(lines[2], [&b"[3] "[..], &[b'y'; 50], b"\n"].concat());
    }
}
