//! The launcher's progress bar: while a job runs on a terminal, the stage its workers run
//! (its vertices), the records its sources gave out (or the bytes its file sources read)
//! of the known total, the rate and the time left — redrawn from the workers' reports ([`crate::observatory`]). Nothing is
//! drawn when stderr is not a terminal, or with `--progress never`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether `heddle run` shows progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// When stderr is a terminal.
    #[default]
    Auto,
    /// Never.
    Never,
}

impl std::str::FromStr for ProgressMode {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<ProgressMode> {
        match s {
            "auto" => Ok(ProgressMode::Auto),
            "never" => Ok(ProgressMode::Never),
            other => Err(crate::Error::Env(format!(
                "--progress {other:?}: use auto (a bar when stderr is a terminal) or never"
            ))),
        }
    }
}

/// The bar drawn now, so that worker output is written around it.
fn current() -> &'static Mutex<Option<ProgressBar>> {
    static BAR: OnceLock<Mutex<Option<ProgressBar>>> = OnceLock::new();
    BAR.get_or_init(|| Mutex::new(None))
}

/// Runs `write` with the bar (if any) cleared, then draws it again.
pub(crate) fn around<R>(write: impl FnOnce() -> R) -> R {
    let bar = current().lock().unwrap_or_else(PoisonError::into_inner).clone();
    match bar {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// Draws progress until dropped.
#[derive(Debug)]
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing under `mode` (nothing when stderr is not a terminal).
    pub(crate) fn start(mode: ProgressMode) -> Option<Progress> {
        if mode == ProgressMode::Never || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("heddle-progress".into())
            .spawn(move || draw(&flag))
            .ok()?;
        Some(Progress { stop, thread: Some(thread) })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn bar_for(name: &str, total: Option<u64>, bytes: bool) -> ProgressBar {
    let (bar, template) = match (total, bytes) {
        (Some(n), false) => {
            (ProgressBar::new(n), "{prefix} [{bar:30}] {human_pos}/{human_len} records{msg}")
        }
        (Some(n), true) => {
            (ProgressBar::new(n), "{prefix} [{bar:30}] {binary_bytes}/{binary_total_bytes}{msg}")
        }
        (None, false) => {
            (ProgressBar::new_spinner(), "{prefix} {spinner} {human_pos} records{msg}")
        }
        (None, true) => (ProgressBar::new_spinner(), "{prefix} {spinner} {binary_bytes}{msg}"),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(5));
    bar.set_prefix(name.to_string());
    bar
}

/// A rate in words: `1.23 M/s`, or `12.50 MiB/s` for `bytes`.
fn rate(per_s: f64, bytes: bool) -> String {
    if bytes {
        return format!("{}/s", indicatif::BinaryBytes(per_s as u64));
    }
    match per_s {
        r if r >= 1e9 => format!("{:.2} G/s", r / 1e9),
        r if r >= 1e6 => format!("{:.2} M/s", r / 1e6),
        r if r >= 1e3 => format!("{:.1} K/s", r / 1e3),
        r => format!("{r:.0}/s"),
    }
}

/// The rate and time left, from what was done at two reports.
fn rate_and_eta(
    from: (Instant, u64),
    to: (Instant, u64),
    total: Option<u64>,
    bytes: bool,
) -> String {
    let seconds = to.0.duration_since(from.0).as_secs_f64();
    if seconds <= 0.0 {
        return String::new(); // one report so far: no rate yet
    }
    let per_s = to.1.saturating_sub(from.1) as f64 / seconds;
    let mut words = format!(", {}", rate(per_s, bytes));
    if let (Some(total), true) = (total, per_s > 0.0) {
        let left = total.saturating_sub(to.1) as f64 / per_s;
        words.push_str(&format!(
            ", ETA {}",
            indicatif::HumanDuration(Duration::from_secs_f64(left))
        ));
    }
    words
}

fn draw(stop: &AtomicBool) {
    let mut shown: Option<(u64, Option<u64>, bool, ProgressBar)> = None;
    // What was done when it last changed, and at the change before.
    let mut seen: Option<((Instant, u64), (Instant, u64))> = None;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        let Some(p) = crate::observatory::global().lock().progress() else {
            continue;
        };
        let same = |(s, t, b, _): &(u64, Option<u64>, bool, ProgressBar)| {
            (*s, *t, *b) == (p.stage, p.total, p.bytes)
        };
        if !shown.as_ref().is_some_and(same) {
            if let Some((_, _, _, old)) = shown.take() {
                old.finish();
            }
            let bar = bar_for(&format!("stage {}: {}", p.stage, p.name), p.total, p.bytes);
            *current().lock().unwrap_or_else(PoisonError::into_inner) = Some(bar.clone());
            shown = Some((p.stage, p.total, p.bytes, bar));
            seen = None;
        }
        let now = (Instant::now(), p.done);
        seen = match seen {
            None => Some((now, now)),
            Some((_, last)) if last.1 != p.done => Some((last, now)),
            unchanged => unchanged,
        };
        if let (Some((_, _, _, bar)), Some((from, to))) = (&shown, seen) {
            bar.set_position(p.done);
            bar.set_message(rate_and_eta(from, to, p.total, p.bytes));
        }
    }
    *current().lock().unwrap_or_else(PoisonError::into_inner) = None;
    if let Some((_, _, _, bar)) = shown {
        bar.finish();
    }
}
