//! `heddle._heddle.task.Edge` (exported as `heddle.task.Edge`): how records move between the
//! instances of two vertices of a task graph of Python tasks — the dataflow operations of
//! `heddle_task::Edge`, chosen here and typed when the graph is built (`task_graph`).

use pyo3::prelude::*;

use crate::errors::argument;
use crate::task_records::{InTag, OutTag};

/// How an edge connects instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    Direct,
    Hash,
    Partition,
    Broadcast,
    Reduce,
    Gather,
    KeyedReduce,
    KeyedGather,
}

impl Link {
    /// The name of the `Edge` constructor that makes this link.
    fn name(self) -> &'static str {
        match self {
            Link::Direct => "direct",
            Link::Hash => "hash",
            Link::Partition => "partition",
            Link::Broadcast => "broadcast",
            Link::Reduce => "reduce",
            Link::Gather => "gather",
            Link::KeyedReduce => "keyed_reduce",
            Link::KeyedGather => "keyed_gather",
        }
    }

    /// What the receiving vertex gets.
    pub(crate) fn delivers(self) -> InTag {
        match self {
            Link::Gather => InTag::Tagged,
            Link::KeyedReduce => InTag::Pair,
            Link::KeyedGather => InTag::Group,
            _ => InTag::Obj,
        }
    }

    /// What the sending vertex emits.
    pub(crate) fn takes(self) -> OutTag {
        match self {
            Link::KeyedReduce | Link::KeyedGather => OutTag::Pair,
            _ => OutTag::Obj,
        }
    }
}

/// How records move between the instances of two vertices (a dataflow operation); made
/// by the static methods (see ``heddle.task.Edge``).
#[pyclass(frozen, module = "heddle._heddle.task", name = "Edge")]
#[derive(Debug)]
pub(crate) struct PyEdge {
    pub(crate) link: Link,
    /// The partitioner or reducer of the edges that take one.
    pub(crate) func: Option<Py<PyAny>>,
}

fn with_function(link: Link, f: Bound<'_, PyAny>) -> PyResult<PyEdge> {
    if !f.is_callable() {
        let type_name = f.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(argument(format!("Edge.{} takes a function, not {type_name}", link.name())));
    }
    Ok(PyEdge { link, func: Some(f.unbind()) })
}

#[pymethods]
impl PyEdge {
    /// Instance i to instance i (equal parallelism). Between instances on one worker the
    /// records pass in memory, as Python objects (chaining).
    #[staticmethod]
    fn direct() -> PyEdge {
        PyEdge { link: Link::Direct, func: None }
    }

    /// Each record to the instance a hash of its canonical encoding picks (equal records,
    /// equal instance, on every worker).
    #[staticmethod]
    fn hash() -> PyEdge {
        PyEdge { link: Link::Hash, func: None }
    }

    /// Each record to instance ``partitioner(record) % parallelism``.
    #[staticmethod]
    fn partition(partitioner: Bound<'_, PyAny>) -> PyResult<PyEdge> {
        with_function(Link::Partition, partitioner)
    }

    /// Every record to every downstream instance.
    #[staticmethod]
    fn broadcast() -> PyEdge {
        PyEdge { link: Link::Broadcast, func: None }
    }

    /// All records combined with ``reducer`` (associative, commutative) into one value per
    /// downstream instance (in streaming mode: running values).
    #[staticmethod]
    fn reduce(reducer: Bound<'_, PyAny>) -> PyResult<PyEdge> {
        with_function(Link::Reduce, reducer)
    }

    /// Every record to every downstream instance as ``(task, record)``, ``task`` being the
    /// sending instance's task id.
    #[staticmethod]
    fn gather() -> PyEdge {
        PyEdge { link: Link::Gather, func: None }
    }

    /// ``(key, value)`` records grouped by key, values combined with ``reducer`` (combined
    /// on the sending worker first in batch mode).
    #[staticmethod]
    fn keyed_reduce(reducer: Bound<'_, PyAny>) -> PyResult<PyEdge> {
        with_function(Link::KeyedReduce, reducer)
    }

    /// ``(key, value)`` records grouped by key: ``(key, [values])`` per key.
    #[staticmethod]
    fn keyed_gather() -> PyEdge {
        PyEdge { link: Link::KeyedGather, func: None }
    }

    /// The operation's name: ``"direct"``, ``"hash"``, ``"keyed_reduce"`` ...
    #[getter]
    fn kind(&self) -> &'static str {
        self.link.name()
    }

    /// The partitioner or reducer, for the edges that take one.
    #[getter]
    fn func(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.func.as_ref().map(|f| f.clone_ref(py))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let arg = match &self.func {
            Some(f) => f.bind(py).repr()?.to_string(),
            None => String::new(),
        };
        Ok(format!("Edge.{}({arg})", self.link.name()))
    }
}

/// Adds the edge class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEdge>()
}
