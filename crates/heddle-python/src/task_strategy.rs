//! `heddle._heddle.task.Strategy` (exported as `heddle.task.Strategy`): when a task runs, a
//! `heddle_task::Strategy` checked where it is made.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use heddle_task::Strategy;
use pyo3::prelude::*;

use crate::errors::argument;

/// A strategy from its parts (`on_data`, period in milliseconds, most runs).
fn strategy(on_data: bool, period_ms: Option<f64>, max_runs: Option<u64>) -> PyResult<Strategy> {
    let period = period_ms.map(period).transpose()?;
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

fn period(ms: f64) -> PyResult<Duration> {
    if !(ms.is_finite() && ms > 0.0) {
        return Err(argument(format!(
            "a strategy's period must be a positive number of milliseconds, not {ms}"
        )));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// When a task runs (Granules' scheduling strategies): when data arrives, every
/// ``period_ms`` milliseconds, at most ``max_runs`` times, or a combination (see
/// ``heddle.task.Strategy``).
#[pyclass(frozen, eq, module = "heddle._heddle.task", name = "Strategy")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PyStrategy(pub(crate) Strategy);

#[pymethods]
impl PyStrategy {
    /// A strategy from its parts; one that does not run on data needs a period.
    #[new]
    #[pyo3(signature = (runs_on_data = true, period_ms = None, max_runs = None))]
    fn new(runs_on_data: bool, period_ms: Option<f64>, max_runs: Option<u64>) -> PyResult<Self> {
        Ok(PyStrategy(strategy(runs_on_data, period_ms, max_runs)?))
    }

    /// Runs whenever input is waiting (the default).
    #[staticmethod]
    fn on_data() -> PyStrategy {
        PyStrategy(Strategy::on_data())
    }

    /// Runs every ``period_ms`` milliseconds only: input waits in the task's queue until
    /// the next run, which executes all of it and then calls ``tick``.
    #[staticmethod]
    fn periodic(period_ms: f64) -> PyResult<PyStrategy> {
        Ok(PyStrategy(Strategy::periodic(period(period_ms)?)))
    }

    /// Also runs every ``period_ms`` milliseconds (``tick`` with no input waiting).
    fn every(&self, period_ms: f64) -> PyResult<PyStrategy> {
        Ok(PyStrategy(self.0.every(period(period_ms)?)))
    }

    /// Retires the task after ``runs`` activations.
    fn at_most(&self, runs: u64) -> PyStrategy {
        PyStrategy(self.0.at_most(runs))
    }

    /// Whether the task runs when input arrives.
    #[getter]
    fn runs_on_data(&self) -> bool {
        self.0.runs_on_data()
    }

    /// The period in milliseconds, if the task also runs on a timer.
    #[getter]
    fn period_ms(&self) -> Option<f64> {
        self.0.period().map(|p| p.as_secs_f64() * 1000.0)
    }

    /// Activations after which the task retires, if limited.
    #[getter]
    fn max_runs(&self) -> Option<u64> {
        self.0.max_runs()
    }

    fn __hash__(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.0.runs_on_data(), self.0.period(), self.0.max_runs()).hash(&mut h);
        h.finish()
    }

    fn __getnewargs__(&self) -> (bool, Option<f64>, Option<u64>) {
        (self.runs_on_data(), self.period_ms(), self.max_runs())
    }

    fn __repr__(&self) -> String {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "None".into());
        format!(
            "Strategy(runs_on_data={}, period_ms={}, max_runs={})",
            if self.runs_on_data() { "True" } else { "False" },
            opt(self.period_ms().map(|p| format!("{p:?}"))),
            opt(self.max_runs().map(|k| k.to_string()))
        )
    }
}

/// The strategy of a `heddle.task.Strategy`.
pub(crate) fn strategy_from(obj: &Bound<'_, PyAny>) -> PyResult<Strategy> {
    obj.cast::<PyStrategy>().map(|s| s.get().0).map_err(|_| {
        let type_name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        argument(format!("expected a heddle.task.Strategy, not {type_name}"))
    })
}

/// Adds the strategy class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStrategy>()
}
