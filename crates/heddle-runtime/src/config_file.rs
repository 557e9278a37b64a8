//! A job's config file (`heddle run --config FILE`, or `HEDDLE_CONFIG=FILE`): TOML holding
//! defaults for `heddle run`'s options at the top level, `HEDDLE_*` settings for the
//! workers in a `[settings]` table, and the job's default task contract in a
//! `[resources]` table (`cpus`, `memory`, `isolation`: what a task that declares nothing
//! asks for; `HEDDLE_TASK_CPUS`, `HEDDLE_TASK_MEMORY`, `HEDDLE_TASK_ISOLATION`). The command line wins over the file, and a setting
//! already in the environment wins over the file's, as Spark's `spark-defaults.conf` and
//! Flink's config file are overridden by what a job is started with.
//!
//! ```toml
//! workers = 4
//! restarts = 3
//! checkpoint_interval = 1.0
//! memory_per_worker = "4GiB"
//!
//! [settings]
//! HEDDLE_TIMEOUT_S = 60
//!
//! [resources]
//! cpus = 0.5
//! memory = "200MiB"
//! ```
//!
//! ```
//! let c = heddle_runtime::config_file::parse("restarts = 2\n[settings]\nHEDDLE_TIMEOUT_S = 9\n", "job.toml").unwrap();
//! assert_eq!(c.args, ["--restarts", "2"]);
//! assert_eq!(c.settings, [("HEDDLE_TIMEOUT_S".to_string(), "9".to_string())]);
//! ```

use std::path::Path;

use crate::{Error, Result};

/// The variable naming a config file when `--config` is not given.
pub const CONFIG_ENV: &str = "HEDDLE_CONFIG";

/// `heddle run` options a file may set, and whether each is a flag without a value.
const OPTIONS: &[(&str, Kind)] = &[
    ("workers", Kind::Integer),
    ("init_timeout", Kind::Number),
    ("transport", Kind::Text),
    ("master_bind", Kind::Text),
    ("launcher", Kind::Text),
    ("launcher_args", Kind::Text),
    ("allocate", Kind::Text),
    ("kill_grace", Kind::Number),
    ("restarts", Kind::Integer),
    ("cpus_per_worker", Kind::Amount),
    ("memory_per_worker", Kind::Amount),
    ("heartbeat_interval", Kind::Number),
    ("heartbeat_timeout", Kind::Number),
    ("checkpoint_interval", Kind::Number),
    ("alignment_timeout", Kind::Amount),
    ("checkpoint_dir", Kind::Text),
    ("security", Kind::Text),
    ("dashboard", Kind::Text),
    ("progress", Kind::Text),
    ("log_format", Kind::Text),
    ("mpi4py", Kind::Flag),
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Integer,
    Number,
    Text,
    /// A number or a text (`"4GiB"`, `0.5`, `"off"`).
    Amount,
    Flag,
}

/// The `[resources]` keys and the settings they become.
const RESOURCES: &[(&str, &str)] = &[
    ("cpus", "HEDDLE_TASK_CPUS"),
    ("memory", "HEDDLE_TASK_MEMORY"),
    ("isolation", "HEDDLE_TASK_ISOLATION"),
    ("io_bytes_per_s", "HEDDLE_TASK_IO_BYTES_PER_S"),
    ("net_bytes_per_s", "HEDDLE_TASK_NET_BYTES_PER_S"),
    ("admission", "HEDDLE_ADMISSION"),
    ("admission_timeout_s", "HEDDLE_ADMISSION_TIMEOUT_S"),
];

/// What a config file sets.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JobConfig {
    /// `heddle run` options as arguments (`--restarts`, `3`), to go before the command
    /// line's own (which override them).
    pub args: Vec<String>,
    /// `HEDDLE_*` settings for the workers (those already in the environment win).
    pub settings: Vec<(String, String)>,
}

/// Reads and checks the config file at `path`.
///
/// # Errors
/// [`Error::Env`]: a file that cannot be read, or [`parse`]'s errors.
pub fn load(path: &Path) -> Result<JobConfig> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Env(format!("cannot read the config file {}: {e}", path.display())))?;
    parse(&text, &path.display().to_string())
}

/// Checks the text of a config file named `name` (for messages).
///
/// # Errors
/// [`Error::Env`] naming `name:line`, the key and what to do: a file that is not TOML, an
/// unknown option or setting (with the closest known one), a value of the wrong type.
pub fn parse(text: &str, name: &str) -> Result<JobConfig> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        Error::Env(format!("{name}:{line}: not a valid config file: {}", e.message()))
    })?;
    let line =
        |key: &str| text.lines().position(|l| l.trim_start().starts_with(key)).map_or(1, |i| i + 1);
    let known: Vec<&str> = OPTIONS.iter().map(|(k, _)| *k).collect();
    let mut config = JobConfig::default();
    for (key, value) in &doc {
        if key == "settings" {
            let table = value.as_table().ok_or_else(|| {
                Error::Env(format!("{name}:{}: `{key}` must be a table ([{key}])", line(key)))
            })?;
            for (k, v) in table {
                crate::check_known_keys([k.clone()])
                    .map_err(|e| Error::Env(format!("{name}:{}: {}", line(k), detail(e))))?;
                if !k.starts_with("HEDDLE_") {
                    return Err(Error::Env(format!(
                        "{name}:{}: {k} is not a Heddle setting (they start with HEDDLE_)",
                        line(k)
                    )));
                }
                let v = scalar(v).ok_or_else(|| {
                    Error::Env(format!(
                        "{name}:{}: {k} must be a string, number or boolean",
                        line(k)
                    ))
                })?;
                config.settings.push((k.clone(), v));
            }
            continue;
        }
        if key == "resources" {
            let table = value.as_table().ok_or_else(|| {
                Error::Env(format!("{name}:{}: `{key}` must be a table ([{key}])", line(key)))
            })?;
            for (k, v) in table {
                let Some(&(_, setting)) = RESOURCES.iter().find(|(r, _)| r == k) else {
                    return Err(Error::Env(format!(
                        "{name}:{}: unknown resource `{k}` in [resources]; use cpus, memory, \
                         io_bytes_per_s, net_bytes_per_s, isolation, admission or \
                         admission_timeout_s",
                        line(k)
                    )));
                };
                let v = match v {
                    toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_) => {
                        scalar(v).unwrap_or_default()
                    }
                    _ => {
                        return Err(Error::Env(format!(
                            "{name}:{}: `{k}` must be a number or a string (0.5, \"200MiB\")",
                            line(k)
                        )))
                    }
                };
                config.settings.push((setting.to_string(), v));
            }
            continue;
        }
        let Some(&(_, kind)) = OPTIONS.iter().find(|(k, _)| k == key) else {
            let hint = match heddle_comm::closest(key, &known) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!(
                    "known options: {}, and the tables [settings] and [resources]",
                    known.join(", ")
                ),
            };
            return Err(Error::Env(format!(
                "{name}:{}: unknown option `{key}`; {hint}",
                line(key)
            )));
        };
        let flag = format!("--{}", key.replace('_', "-"));
        let bad = |what: &str| {
            Error::Env(format!("{name}:{}: `{key}` must be {what}, not {value}", line(key)))
        };
        match (kind, value) {
            (Kind::Flag, toml::Value::Boolean(on)) => {
                if *on {
                    config.args.push(flag);
                }
            }
            (Kind::Flag, _) => return Err(bad("true or false")),
            (Kind::Integer, toml::Value::Integer(n)) if *n >= 0 => {
                config.args.extend([flag, n.to_string()]);
            }
            (Kind::Integer, _) => return Err(bad("a whole number, 0 or more")),
            (Kind::Number, toml::Value::Integer(_) | toml::Value::Float(_)) => {
                config.args.extend([flag, scalar(value).unwrap_or_default()]);
            }
            (Kind::Number, _) => return Err(bad("a number of seconds")),
            (Kind::Text, toml::Value::String(s)) => config.args.extend([flag, s.clone()]),
            (Kind::Text, _) => return Err(bad("a string")),
            (
                Kind::Amount,
                toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_),
            ) => {
                config.args.extend([flag, scalar(value).unwrap_or_default()]);
            }
            (Kind::Amount, _) => return Err(bad("a number or a string")),
        }
    }
    Ok(config)
}

/// The file's value as the command line or the environment would spell it.
fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn detail(e: Error) -> String {
    match e {
        Error::Env(m) => m,
        other => other.to_string(),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_arguments_and_settings_stay_settings() {
        let text =
            "workers = 3\nrestarts = 2\nheartbeat_timeout = 2.5\nmemory_per_worker = \"4GiB\"\n\
                    cpus_per_worker = 0.5\nalignment_timeout = \"off\"\nmpi4py = true\n\
                    [settings]\nHEDDLE_TIMEOUT_S = 60\nHEDDLE_LOG = \"info\"\n\
                    [resources]\ncpus = 0.25\nmemory = \"200MiB\"\nisolation = \"process\"\n\
                    io_bytes_per_s = \"8MiB\"\n";
        let c = parse(text, "job.toml").unwrap();
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        assert_eq!(
            args,
            [
                "--workers",
                "3",
                "--restarts",
                "2",
                "--heartbeat-timeout",
                "2.5",
                "--memory-per-worker",
                "4GiB",
                "--cpus-per-worker",
                "0.5",
                "--alignment-timeout",
                "off",
                "--mpi4py",
            ]
        );
        let settings: Vec<(&str, &str)> =
            c.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            settings,
            [
                ("HEDDLE_TIMEOUT_S", "60"),
                ("HEDDLE_LOG", "info"),
                ("HEDDLE_TASK_CPUS", "0.25"),
                ("HEDDLE_TASK_MEMORY", "200MiB"),
                ("HEDDLE_TASK_ISOLATION", "process"),
                ("HEDDLE_TASK_IO_BYTES_PER_S", "8MiB"),
            ]
        );
    }

    #[test]
    fn mistakes_name_the_file_line_and_key() {
        let cases = [
            (
                "workers = 2\nrestart = 3\n",
                "job.toml:2: unknown option `restart`; did you mean `restarts`?",
            ),
            ("workers = -1\n", "job.toml:1: `workers` must be a whole number"),
            (
                "workers = 2\nheartbeat_timeout = \"soon\"\n",
                "job.toml:2: `heartbeat_timeout` must be a number",
            ),
            (
                "[settings]\nHEDDLE_TIMOUT_S = 1\n",
                "job.toml:2: unknown setting HEDDLE_TIMOUT_S; did you mean HEDDLE_TIMEOUT_S?",
            ),
            ("workers = 2\nrestarts = \n", "job.toml:2: not a valid config file"),
            ("settings = 3\n", "job.toml:1: `settings` must be a table"),
            ("[resources]\ncores = 2\n", "job.toml:2: unknown resource `cores` in [resources]"),
            ("[resources]\nmemory = [1]\n", "job.toml:2: `memory` must be a number or a string"),
        ];
        for (text, says) in cases {
            let e = parse(text, "job.toml").unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let e = load(Path::new("/nonexistent/heddle.toml")).unwrap_err().to_string();
        assert!(e.contains("cannot read the config file /nonexistent/heddle.toml"), "{e}");
    }
}
