//! Task strategies (when a task runs) as Python sees them: built from their parts or
//! from a `heddle.task.Strategy`, and taken apart again.

use heddle_task::Strategy;
use pyo3::prelude::*;

use crate::errors::argument;

/// A strategy from its parts (`on_data`, period in milliseconds, most runs).
pub(crate) fn strategy(
    on_data: bool,
    period_ms: Option<f64>,
    max_runs: Option<u64>,
) -> PyResult<Strategy> {
    let period = match period_ms {
        Some(ms) if !(ms.is_finite() && ms > 0.0) => {
            return Err(argument(format!(
                "a strategy's period must be a positive number of milliseconds, not {ms}"
            )))
        }
        Some(ms) => Some(std::time::Duration::from_secs_f64(ms / 1000.0)),
        None => None,
    };
    let s = match (on_data, period) {
        (true, None) => Strategy::on_data(),
        (true, Some(p)) => Strategy::on_data().every(p),
        (false, Some(p)) => Strategy::periodic(p),
        (false, None) => {
            return Err(argument(
                "a strategy that does not run on data needs a period (every T milliseconds)",
            ))
        }
    };
    Ok(match max_runs {
        Some(k) => s.at_most(k),
        None => s,
    })
}

/// The strategy of a `heddle.task.Strategy` (attributes `runs_on_data`, `period_ms`,
/// `max_runs`).
pub(crate) fn strategy_from(obj: &Bound<'_, PyAny>) -> PyResult<Strategy> {
    let parts = (|| -> PyResult<(bool, Option<f64>, Option<u64>)> {
        Ok((
            obj.getattr("runs_on_data")?.extract()?,
            obj.getattr("period_ms")?.extract()?,
            obj.getattr("max_runs")?.extract()?,
        ))
    })()
    .map_err(|_| argument("expected a heddle.task.Strategy"))?;
    strategy(parts.0, parts.1, parts.2)
}

/// `(on_data, period_ms, max_runs)` of a strategy.
pub(crate) fn strategy_parts(s: Strategy) -> (bool, Option<f64>, Option<u64>) {
    (s.runs_on_data(), s.period().map(|p| p.as_secs_f64() * 1000.0), s.max_runs())
}
