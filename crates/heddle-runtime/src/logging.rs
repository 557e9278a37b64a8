//! Workers' and launchers' diagnostics: a `tracing` subscriber writing to stderr (which
//! the launcher passes on with the `[rank]` prefix), its levels from `HEDDLE_LOG`
//! (EnvFilter syntax: `info`, `heddle_task=debug,warn`; default `warn`) and its format
//! from `HEDDLE_LOG_FORMAT` (`text`, the default, or `json`: one object per line).
//!
//! ```
//! heddle_runtime::install_logging("heddle worker", None); // once; later calls do nothing
//! tracing::warn!("shown at the default level");
//! ```

use tracing_subscriber::EnvFilter;

/// The log format's variable.
pub const LOG_FORMAT_VAR: &str = "HEDDLE_LOG_FORMAT";

/// Installs the process's subscriber unless one is installed already (a program that
/// set up its own keeps it). `who` names the process in a bad setting's warning;
/// `format` (`text` or `json`) overrides `HEDDLE_LOG_FORMAT`.
pub fn install_logging(who: &str, format: Option<&str>) {
    let filter = match std::env::var("HEDDLE_LOG") {
        Ok(v) if !v.is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("{who}: HEDDLE_LOG={v:?} is not a filter ({e}); logging warnings only");
            EnvFilter::new("warn")
        }),
        _ => EnvFilter::new("warn"),
    };
    let format = format.map(str::to_string).or_else(|| std::env::var(LOG_FORMAT_VAR).ok());
    let json = match format.as_deref() {
        Some("json") => true,
        Some("text") | Some("") | None => false,
        Some(other) => {
            eprintln!("{who}: {LOG_FORMAT_VAR}={other:?} is not text or json; using text");
            false
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true);
    let _ = if json {
        builder.json().flatten_event(true).with_current_span(false).try_init()
    } else {
        builder.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).try_init()
    };
}
