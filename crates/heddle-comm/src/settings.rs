//! The numeric `HEDDLE_*` settings and their valid ranges, in one place: every layer that
//! reads one (and `heddle run`, before it starts any worker) parses it here, so a bad value
//! is refused at start with an error naming the variable, the value and the range — never a
//! 1 ms timeout, a panic or an allocation abort later.
//!
//! ```
//! use heddle_comm::settings::{self, WINDOW};
//! assert_eq!(settings::parse(&WINDOW, "16")?, 16.0);
//! let err = settings::parse(&WINDOW, "1e8").unwrap_err().to_string();
//! assert!(err.contains("HEDDLE_WINDOW=\"1e8\"") && err.contains("from 2 to 1024"), "{err}");
//! # Ok::<(), heddle_comm::Error>(())
//! ```

use std::time::Duration;

use crate::{Error, Result};

/// A numeric setting: its variable, what it counts, and its valid range (inclusive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// The environment variable.
    pub name: &'static str,
    /// What the number counts, for messages ("buffers", "seconds" ...).
    pub unit: &'static str,
    /// Smallest valid value.
    pub min: f64,
    /// Largest valid value.
    pub max: f64,
    /// Whether only whole numbers are valid.
    pub whole: bool,
}

/// `HEDDLE_BUFFER_BYTES`: bytes of one transport buffer (also a multiple of 64).
pub const BUFFER_BYTES: Bounds = Bounds {
    name: "HEDDLE_BUFFER_BYTES",
    unit: "bytes",
    min: 1024.0,
    max: 16_777_216.0,
    whole: true,
};
/// `HEDDLE_WINDOW`: buffers a receiver grants each sender.
pub const WINDOW: Bounds =
    Bounds { name: "HEDDLE_WINDOW", unit: "buffers", min: 2.0, max: 1024.0, whole: true };
/// `HEDDLE_TIMEOUT_S`: the longest a blocking call waits without progress (up to a week).
pub const TIMEOUT_S: Bounds =
    Bounds { name: "HEDDLE_TIMEOUT_S", unit: "seconds", min: 0.001, max: 604_800.0, whole: false };
/// `HEDDLE_INIT_TIMEOUT_S`: how long workers have to join (up to a day).
pub const INIT_TIMEOUT_S: Bounds = Bounds {
    name: "HEDDLE_INIT_TIMEOUT_S",
    unit: "seconds",
    min: 0.01,
    max: 86_400.0,
    whole: false,
};
/// `HEDDLE_HEARTBEAT_S`: how often workers and the job master tell each other they are
/// alive (default 1 s).
pub const HEARTBEAT_S: Bounds =
    Bounds { name: "HEDDLE_HEARTBEAT_S", unit: "seconds", min: 0.01, max: 3_600.0, whole: false };
/// `HEDDLE_HEARTBEAT_TIMEOUT_S`: silence after which a worker (or the master) is declared
/// failed (default 5 s).
pub const HEARTBEAT_TIMEOUT_S: Bounds = Bounds {
    name: "HEDDLE_HEARTBEAT_TIMEOUT_S",
    unit: "seconds",
    min: 0.05,
    max: 86_400.0,
    whole: false,
};
/// `HEDDLE_CHECKPOINT_INTERVAL_S`: time between two checkpoints of a stream (unset:
/// streams do not checkpoint).
pub const CHECKPOINT_INTERVAL_S: Bounds = Bounds {
    name: "HEDDLE_CHECKPOINT_INTERVAL_S",
    unit: "seconds",
    min: 0.001,
    max: 86_400.0,
    whole: false,
};
/// `HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S`: how long a stream's checkpoint aligns its
/// barriers before it goes on unaligned, storing the records in flight (unset: 0.005 s;
/// `off`: always aligned).
pub const CHECKPOINT_ALIGNMENT_TIMEOUT_S: Bounds = Bounds {
    name: "HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S",
    unit: "seconds",
    min: 0.0,
    max: 86_400.0,
    whole: false,
};
/// `HEDDLE_CHECKPOINT_DIR`: where streams checkpoint (a path).
pub const CHECKPOINT_DIR: &str = "HEDDLE_CHECKPOINT_DIR";
/// `HEDDLE_ATTEMPT`: which attempt of a restarted job this is.
pub const ATTEMPT: Bounds =
    Bounds { name: "HEDDLE_ATTEMPT", unit: "attempt", min: 0.0, max: 1_000_000.0, whole: true };
/// `HEDDLE_SPIN_POLLS`: idle polls before a waiting thread yields its core.
pub const SPIN_POLLS: Bounds = Bounds {
    name: "HEDDLE_SPIN_POLLS",
    unit: "polls",
    min: 0.0,
    max: 4_000_000_000.0,
    whole: true,
};
/// `HEDDLE_TASK_THREADS`: executor threads per worker.
pub const TASK_THREADS: Bounds =
    Bounds { name: "HEDDLE_TASK_THREADS", unit: "threads", min: 1.0, max: 1024.0, whole: true };
/// `HEDDLE_WORLD_SIZE` (and the other launchers' size variables): workers in the job.
pub const WORLD_SIZE: Bounds =
    Bounds { name: "HEDDLE_WORLD_SIZE", unit: "workers", min: 1.0, max: 1_048_576.0, whole: true };
/// `HEDDLE_RANK` (and the other launchers' rank variables): this worker's rank.
pub const RANK: Bounds =
    Bounds { name: "HEDDLE_RANK", unit: "rank", min: 0.0, max: 1_048_575.0, whole: true };

/// Parses an alignment timeout ([`CHECKPOINT_ALIGNMENT_TIMEOUT_S`]): seconds (0: unaligned
/// as soon as a barrier waits), or `off` (always aligned).
///
/// ```
/// use std::time::Duration;
/// use heddle_comm::settings::alignment_timeout;
/// assert_eq!(alignment_timeout("0.05")?, Some(Duration::from_millis(50)));
/// assert_eq!(alignment_timeout("off")?, None);
/// assert!(alignment_timeout("soon").is_err());
/// # Ok::<(), heddle_comm::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for a value that is neither seconds nor `off`.
pub fn alignment_timeout(value: &str) -> Result<Option<Duration>> {
    if value.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    seconds(&CHECKPOINT_ALIGNMENT_TIMEOUT_S, value).map(Some)
}

/// Every bounded setting, for `heddle run` to check before it starts a worker.
pub const ALL: &[Bounds] = &[
    BUFFER_BYTES,
    WINDOW,
    TIMEOUT_S,
    INIT_TIMEOUT_S,
    HEARTBEAT_S,
    HEARTBEAT_TIMEOUT_S,
    CHECKPOINT_INTERVAL_S,
    ATTEMPT,
    SPIN_POLLS,
    TASK_THREADS,
];

/// Parses `value` of the setting `b`.
///
/// # Errors
/// [`Error::Config`] naming the variable, the value and the valid range, for anything
/// that is not a number in range (`nan`, `inf`, `-1`, `abc`, `1e8` for a window ...).
pub fn parse(b: &Bounds, value: &str) -> Result<f64> {
    let v = value.trim();
    let parsed =
        if b.whole { v.parse::<u64>().ok().map(|n| n as f64) } else { v.parse::<f64>().ok() };
    match parsed {
        Some(x) if x.is_finite() && x >= b.min && x <= b.max => Ok(x),
        _ => Err(Error::Config(format!(
            "{}={value:?} is not valid: expected {} {} from {} to {}",
            b.name,
            if b.whole { "a whole number of" } else { "a number of" },
            b.unit,
            b.min,
            b.max
        ))),
    }
}

/// Parses a whole-number setting.
///
/// # Errors
/// As [`parse`].
pub fn whole(b: &Bounds, value: &str) -> Result<u64> {
    parse(b, value).map(|x| x as u64)
}

/// Parses a setting of seconds.
///
/// # Errors
/// As [`parse`].
pub fn seconds(b: &Bounds, value: &str) -> Result<Duration> {
    parse(b, value).map(Duration::from_secs_f64)
}

/// Checks every bounded setting present in the environment (`get` looks one up).
///
/// # Errors
/// The first bad value, as [`parse`].
pub fn check_all(get: impl Fn(&str) -> Option<String>) -> Result<()> {
    for b in ALL {
        if let Some(v) = get(b.name).filter(|v| !v.is_empty()) {
            parse(b, &v)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_name_the_variable_value_and_range() {
        for (b, bad) in [
            (TIMEOUT_S, "0"),
            (TIMEOUT_S, "-1"),
            (TIMEOUT_S, "nan"),
            (TIMEOUT_S, "inf"),
            (TIMEOUT_S, "abc"),
            (TIMEOUT_S, "1e9"),
            (WINDOW, "1e8"),
            (WINDOW, "1"),
            (WINDOW, "100000"),
            (BUFFER_BYTES, "12"),
            (SPIN_POLLS, "-3"),
            (SPIN_POLLS, "99999999999"),
            (TASK_THREADS, "0"),
            (INIT_TIMEOUT_S, ""),
        ] {
            let e = parse(&b, bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{}={bad:?}", b.name))
                    && e.contains(&format!("from {} to {}", b.min, b.max)),
                "{e}"
            );
        }
    }

    #[test]
    fn good_values_parse() {
        assert_eq!(seconds(&TIMEOUT_S, "2.5").unwrap(), Duration::from_millis(2500));
        assert_eq!(whole(&WINDOW, " 16 ").unwrap(), 16);
        assert_eq!(whole(&SPIN_POLLS, "0").unwrap(), 0);
        assert!(check_all(|k| (k == "HEDDLE_WINDOW").then(|| "4".to_string())).is_ok());
        assert!(check_all(|k| (k == "HEDDLE_TIMEOUT_S").then(|| "inf".to_string())).is_err());
    }
}
