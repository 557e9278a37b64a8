//! `heddle run --config FILE` (or `HEDDLE_CONFIG=FILE`): the file's options go before the
//! command line's own, which win; its `[settings]` and `[resources]` go into the
//! environment the workers inherit, where not already set (`heddle_runtime::config_file`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use heddle_runtime::config_file::{self, CONFIG_ENV};

use super::{Cli, Cmd};

/// `cli` (parsed from `argv`) with its config file applied: parsed again with the file's
/// options first. A command other than `run`, or no config file, is returned as it is.
///
/// # Errors
/// The file's problems, naming it (and the line), for exit status 2.
pub(crate) fn apply(cli: Cli, argv: &[OsString]) -> Result<Cli, String> {
    let Cmd::Run(args) = &cli.command else { return Ok(cli) };
    let path = match (&args.config, std::env::var_os(CONFIG_ENV)) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) if !p.is_empty() => PathBuf::from(p),
        _ => return Ok(cli),
    };
    let config = config_file::load(&path).map_err(|e| e.to_string())?;
    for (k, v) in &config.settings {
        check_resource(k, v)
            .map_err(|(key, e)| format!("{}: [resources] {key} = {v:?}: {e}", path.display()))?;
    }
    for (k, v) in &config.settings {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    }
    if config.args.is_empty() {
        return Ok(cli);
    }
    let at = argv.iter().position(|a| a == "run").ok_or("no `run` on the command line")?;
    let mut again: Vec<OsString> = argv[..=at].to_vec();
    again.extend(config.args.iter().map(OsString::from));
    again.extend(argv[at + 1..].iter().cloned());
    Cli::try_parse_from(again)
        .map_err(|e| format!("with the options of the config file {}: {e}", path.display()))
}

/// Checks a default task contract the way the workers will read it; a mistake comes
/// with the `[resources]` key.
fn check_resource(setting: &str, value: &str) -> Result<(), (&'static str, String)> {
    match setting {
        heddle_task::TASK_CPUS_ENV => {
            heddle_task::parse_cpus(value).map(drop).map_err(|e| ("cpus", e))
        }
        heddle_task::TASK_MEMORY_ENV => {
            heddle_task::parse_bytes(value).map(drop).map_err(|e| ("memory", e))
        }
        heddle_task::TASK_IO_ENV => {
            heddle_task::parse_bytes(value).map(drop).map_err(|e| ("io_bytes_per_s", e))
        }
        heddle_task::TASK_NET_ENV => {
            heddle_task::parse_bytes(value).map(drop).map_err(|e| ("net_bytes_per_s", e))
        }
        heddle_task::TASK_ISOLATION_ENV => {
            value.parse::<heddle_task::Isolation>().map(drop).map_err(|e| ("isolation", e))
        }
        heddle_task::ADMISSION_ENV => {
            value.parse::<heddle_task::Admission>().map(drop).map_err(|e| ("admission", e))
        }
        heddle_task::ADMISSION_TIMEOUT_ENV => heddle_task::parse_admission_timeout(value)
            .map(drop)
            .map_err(|e| ("admission_timeout_s", e)),
        _ => Ok(()),
    }
}
