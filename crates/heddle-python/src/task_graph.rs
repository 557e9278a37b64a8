//! `heddle._heddle.task.TaskGraph`: a task graph of Python tasks, described from Python and
//! built into a native `heddle_task::TaskGraph` whenever it is planned or run.
//!
//! Native vertices are typed by the records they receive and emit. A Python task
//! receives what its incoming edges deliver (records; `(task, record)` from a gather
//! edge; `(key, value)` from a keyed reduce; `(key, [values])` from a keyed gather) and
//! emits `(key, value)` pairs when its outgoing edges are keyed; each vertex's types are
//! chosen from its edges when the graph is built.

use std::any::Any;
use std::marker::PhantomData;

use heddle_task::{Edge, Isolation, Resources, Strategy, TaskGraph, Vertex};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::errors::{argument, Kind};
use crate::failure;
use crate::record::{key_bytes, stable_hash, PyKey, PyObj};
use crate::task_adapters::{PyCompute, PySource, PyTask};
use crate::task_edge::{Link, PyEdge};
use crate::task_records::{InRec, InTag, OutRec, OutTag};
use crate::task_strategy::PyStrategy;

fn in_shape(t: InTag) -> &'static str {
    match t {
        InTag::Obj => "records",
        InTag::Tagged => "(task, record) from a gather edge",
        InTag::Pair => "(key, value) from a keyed_reduce edge",
        InTag::Group => "(key, [values]) from a keyed_gather edge",
    }
}

struct VertexDesc {
    name: String,
    source: bool,
    parallelism: u32,
    factory: Py<PyAny>,
    strategy: Strategy,
    resources: Resources,
    collective: bool,
}

struct EdgeDesc {
    from: usize,
    to: usize,
    kind: Link,
    func: Option<Py<PyAny>>,
}

/// A vertex added to a native graph: its handle seen as a producer (`Vertex<(), O>`),
/// its full handle (`Vertex<I, O>`), and what it emits.
struct Built {
    output: Box<dyn Any>,
    full: Box<dyn Any>,
    out: OutTag,
}

/// The description of a task graph whose tasks are Python objects (see
/// ``heddle.task.TaskGraph``).
#[pyclass(unsendable, module = "heddle._heddle.task", name = "TaskGraph")]
pub(crate) struct PyTaskGraph {
    vertices: Vec<VertexDesc>,
    edges: Vec<EdgeDesc>,
}

impl std::fmt::Debug for PyTaskGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyTaskGraph")
            .field("vertices", &self.vertices.len())
            .field("edges", &self.edges.len())
            .finish()
    }
}

impl PyTaskGraph {
    fn vertex(&self, v: usize) -> PyResult<&VertexDesc> {
        self.vertices.get(v).ok_or_else(|| argument(format!("vertex {v} is not in this graph")))
    }

    /// What vertex `v` receives, from its incoming edges.
    fn in_tag(&self, v: usize) -> PyResult<InTag> {
        let tags: Vec<InTag> =
            self.edges.iter().filter(|e| e.to == v).map(|e| e.kind.delivers()).collect();
        let first = tags.first().copied().unwrap_or(InTag::Obj);
        if let Some(other) = tags.iter().find(|&&t| t != first) {
            return Err(Kind::Graph.err(format!(
                "vertex '{}' would receive {} and {}; one vertex receives one shape of record: \
                 give one of these edges a vertex of its own",
                self.vertices[v].name,
                in_shape(first),
                in_shape(*other)
            )));
        }
        Ok(first)
    }

    /// What vertex `v` emits, from its outgoing edges.
    fn out_tag(&self, v: usize) -> PyResult<OutTag> {
        let tags: Vec<OutTag> =
            self.edges.iter().filter(|e| e.from == v).map(|e| e.kind.takes()).collect();
        let first = tags.first().copied().unwrap_or(OutTag::Obj);
        if tags.iter().any(|&t| t != first) {
            return Err(Kind::Graph.err(format!(
                "vertex '{}' has keyed and plain outgoing edges; keyed edges take (key, value) \
                 pairs, so give them a vertex of their own",
                self.vertices[v].name
            )));
        }
        Ok(first)
    }

    /// The native graph (every task made when a job instantiates it).
    pub(crate) fn build(&self, py: Python<'_>) -> PyResult<TaskGraph> {
        for e in &self.edges {
            if self.vertices[e.to].source {
                return Err(Kind::Graph.err(format!(
                    "invalid task graph: edge '{}' -> '{}' leads into a source",
                    self.vertices[e.from].name, self.vertices[e.to].name
                )));
            }
        }
        let mut g = TaskGraph::new();
        let mut built = Vec::new();
        for (v, d) in self.vertices.iter().enumerate() {
            let out = self.out_tag(v)?;
            let b = if d.source {
                match out {
                    OutTag::Obj => add_source::<PyObj>(py, &mut g, d),
                    OutTag::Pair => add_source::<(PyKey, PyObj)>(py, &mut g, d),
                }
            } else {
                type Tagged = (heddle_dataflow::TaskId, PyObj);
                type Pair = (PyKey, PyObj);
                type Group = (PyKey, Vec<PyObj>);
                match (self.in_tag(v)?, out) {
                    (InTag::Obj, OutTag::Obj) => add_compute::<PyObj, PyObj>(py, &mut g, d),
                    (InTag::Obj, OutTag::Pair) => add_compute::<PyObj, Pair>(py, &mut g, d),
                    (InTag::Tagged, OutTag::Obj) => add_compute::<Tagged, PyObj>(py, &mut g, d),
                    (InTag::Tagged, OutTag::Pair) => add_compute::<Tagged, Pair>(py, &mut g, d),
                    (InTag::Pair, OutTag::Obj) => add_compute::<Pair, PyObj>(py, &mut g, d),
                    (InTag::Pair, OutTag::Pair) => add_compute::<Pair, Pair>(py, &mut g, d),
                    (InTag::Group, OutTag::Obj) => add_compute::<Group, PyObj>(py, &mut g, d),
                    (InTag::Group, OutTag::Pair) => add_compute::<Group, Pair>(py, &mut g, d),
                }
            };
            built.push(b);
        }
        for e in &self.edges {
            let (from, to) = (&built[e.from], &built[e.to]);
            let func = e.func.as_ref().map(|f| f.clone_ref(py));
            let targets = self.vertices[e.to].parallelism;
            match e.kind {
                Link::Direct => link(&mut g, from, to, Edge::<PyObj, PyObj>::direct())?,
                Link::Hash => link(&mut g, from, to, Edge::<PyObj, PyObj>::partition(hash_of))?,
                Link::Partition => {
                    let f = func.expect("checked when connected");
                    link(
                        &mut g,
                        from,
                        to,
                        Edge::<PyObj, PyObj>::partition(move |x| partition_of(&f, x, targets)),
                    )?
                }
                Link::Broadcast => link(&mut g, from, to, Edge::<PyObj, PyObj>::broadcast())?,
                Link::Reduce => {
                    let f = func.expect("checked when connected");
                    link(
                        &mut g,
                        from,
                        to,
                        Edge::<PyObj, PyObj>::reduce(move |a, b| combine(&f, a, b)),
                    )?
                }
                Link::Gather => link(&mut g, from, to, Edge::<PyObj, _>::gather())?,
                Link::KeyedReduce => {
                    let f = func.expect("checked when connected");
                    link(
                        &mut g,
                        from,
                        to,
                        Edge::<(PyKey, PyObj), _>::keyed_reduce(move |a, b| combine(&f, a, b)),
                    )?
                }
                Link::KeyedGather => {
                    link(&mut g, from, to, Edge::<(PyKey, PyObj), _>::keyed_gather())?
                }
            }
        }
        Ok(g)
    }
}

fn add_source<O: OutRec>(py: Python<'_>, g: &mut TaskGraph, d: &VertexDesc) -> Built {
    let (factory, collective) = (d.factory.clone_ref(py), d.collective);
    let v: Vertex<(), O> = g.source(&d.name, d.parallelism, move |i| PySource::<O> {
        task: PyTask::make(&factory, i, collective, "next"),
        _out: PhantomData,
    });
    configure(g, &v, d);
    Built { output: Box::new(v.output()), full: Box::new(v), out: O::TAG }
}

/// A compute vertex: isolable (a thread or its own process, as its contract says)
/// unless it is collective (a process has no communicator).
fn add_compute<I, O>(py: Python<'_>, g: &mut TaskGraph, d: &VertexDesc) -> Built
where
    I: InRec + Serialize + DeserializeOwned,
    O: OutRec + Serialize + DeserializeOwned,
{
    let (factory, collective) = (d.factory.clone_ref(py), d.collective);
    let make = move |i| PyCompute::<I, O> {
        task: PyTask::make(&factory, i, collective, "execute"),
        _io: PhantomData,
    };
    let v: Vertex<I, O> = if collective {
        g.compute(&d.name, d.parallelism, make)
    } else {
        g.isolated(&d.name, d.parallelism, make)
    };
    configure(g, &v, d);
    Built { output: Box::new(v.output()), full: Box::new(v), out: O::TAG }
}

fn configure<I, O>(g: &mut TaskGraph, v: &Vertex<I, O>, d: &VertexDesc) {
    g.strategy(v, d.strategy);
    g.resources(v, d.resources.clone());
    if d.collective {
        g.collective(v);
    }
}

/// Connects two built vertices with a typed edge.
fn link<T: Send + 'static, U: Send + 'static>(
    g: &mut TaskGraph,
    from: &Built,
    to: &Built,
    edge: Edge<T, U>,
) -> PyResult<()> {
    let mismatch =
        || Kind::Graph.err("an edge's record shapes do not match its vertices (internal)");
    let f = from.output.downcast_ref::<Vertex<(), T>>().ok_or_else(mismatch)?;
    match to.out {
        OutTag::Obj => {
            g.connect(f, to.full.downcast_ref::<Vertex<U, PyObj>>().ok_or_else(mismatch)?, edge);
        }
        OutTag::Pair => {
            g.connect(
                f,
                to.full.downcast_ref::<Vertex<U, (PyKey, PyObj)>>().ok_or_else(mismatch)?,
                edge,
            );
        }
    }
    Ok(())
}

/// A hash of the record's canonical encoding (equal records, equal partition).
pub(crate) fn hash_of(x: &PyObj) -> usize {
    if failure::failed() {
        return 0;
    }
    Python::attach(|py| match key_bytes(x.bind(py)) {
        Ok(b) => stable_hash(&b) as usize,
        Err(e) => {
            failure::record(e);
            0
        }
    })
}

/// `f(x) % targets` (Python's modulo, so negative results work too).
fn partition_of(f: &Py<PyAny>, x: &PyObj, targets: u32) -> usize {
    if failure::failed() {
        return 0;
    }
    Python::attach(|py| {
        let r = f
            .bind(py)
            .call1((x.bind(py),))
            .and_then(|i| i.rem(targets))
            .and_then(|i| i.extract::<usize>());
        r.unwrap_or_else(|e| {
            failure::record(e);
            0
        })
    })
}

/// `f(a, b)`; after a failure, `a`.
pub(crate) fn combine(f: &Py<PyAny>, a: PyObj, b: PyObj) -> PyObj {
    if failure::failed() {
        return a;
    }
    Python::attach(|py| match f.bind(py).call1((a.bind(py), b.into_bound(py))) {
        Ok(r) => PyObj::new(r),
        Err(e) => {
            failure::record(e);
            a
        }
    })
}

#[pymethods]
impl PyTaskGraph {
    #[new]
    fn new() -> PyTaskGraph {
        PyTaskGraph { vertices: Vec::new(), edges: Vec::new() }
    }

    /// Adds a vertex of ``parallelism`` instances made by ``factory(index)``; returns its id.
    fn add_vertex(
        &mut self,
        name: String,
        source: bool,
        parallelism: i64,
        factory: Py<PyAny>,
    ) -> PyResult<usize> {
        let parallelism = u32::try_from(parallelism).map_err(|_| {
            Kind::Graph
                .err(format!("vertex '{name}' has parallelism {parallelism}; give it at least 1"))
        })?;
        self.vertices.push(VertexDesc {
            name,
            source,
            parallelism,
            factory,
            strategy: Strategy::default(),
            resources: Resources::default(),
            collective: false,
        });
        Ok(self.vertices.len() - 1)
    }

    /// Connects vertex ``from_`` to vertex ``to`` with ``edge``.
    fn connect(&mut self, py: Python<'_>, from_: usize, to: usize, edge: &PyEdge) -> PyResult<()> {
        self.vertex(from_)?;
        self.vertex(to)?;
        let func = edge.func.as_ref().map(|f| f.clone_ref(py));
        self.edges.push(EdgeDesc { from: from_, to, kind: edge.link, func });
        Ok(())
    }

    /// Sets the strategy the instances of vertex ``v`` start with.
    fn set_strategy(&mut self, v: usize, strategy: &PyStrategy) -> PyResult<()> {
        self.vertex(v)?;
        self.vertices[v].strategy = strategy.0;
        Ok(())
    }

    /// Vertex ``v``'s strategy.
    fn get_strategy(&self, v: usize) -> PyResult<PyStrategy> {
        Ok(PyStrategy(self.vertex(v)?.strategy))
    }

    /// Sets what each instance of vertex ``v`` requests.
    #[pyo3(signature = (v, cpu, memory, hosts, net_bytes_per_s = 0, io_bytes_per_s = 0, isolation = "auto", expected = Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn set_resources(
        &mut self,
        v: usize,
        cpu: f64,
        memory: u64,
        hosts: Vec<String>,
        net_bytes_per_s: u64,
        io_bytes_per_s: u64,
        isolation: &str,
        expected: Vec<(String, f64)>,
    ) -> PyResult<()> {
        let d = self.vertex(v)?;
        let isolation: Isolation = isolation.parse().map_err(argument)?;
        if isolation == Isolation::Process && (d.source || d.collective) {
            return Err(Kind::Graph.err(format!(
                "vertex '{}' cannot run as an isolated process: {}; only compute vertices can \
                 (use isolation='thread' or 'auto')",
                d.name,
                if d.source {
                    "it is a source"
                } else {
                    "it is collective (a process has no communicator)"
                }
            )));
        }
        let mut r = contract(cpu, memory, net_bytes_per_s)?
            .io_bytes_per_s(io_bytes_per_s)
            .isolation(isolation)
            .on_hosts(hosts);
        for (method, calls_per_s) in expected {
            r = r.expect(&method, calls_per_s);
        }
        self.vertices[v].resources = r;
        Ok(())
    }

    /// Gives vertex ``v``'s instances a communicator of their own.
    fn set_collective(&mut self, v: usize) -> PyResult<()> {
        self.vertex(v)?;
        self.vertices[v].collective = true;
        Ok(())
    }

    /// Checks the graph as planning would (names, parallelism, edges, cycles, shapes).
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        self.build(py)?.validate().map_err(crate::errors::task)
    }
}

/// Adds the graph class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTaskGraph>()
}

/// A task's contract, refusing a number of cores that is not above 0.
pub(crate) fn contract(cpus: f64, memory: u64, net_bytes_per_s: u64) -> PyResult<Resources> {
    if !(cpus.is_finite() && cpus > 0.0) {
        return Err(argument(format!("cpus must be a number above 0, not {cpus}")));
    }
    Ok(Resources::new(cpus, memory).net_bytes_per_s(net_bytes_per_s))
}

/// A data-API stage's contract as `heddle.task.Resources.amounts()` gives it: `(cpus,
/// memory, net_bytes_per_s, io_bytes_per_s, isolation)`.
pub(crate) type StageContract = (f64, u64, u64, u64, String);

/// The `Resources` of a [`StageContract`].
pub(crate) fn stage_contract(c: StageContract) -> PyResult<Resources> {
    let (cpus, memory, net_bytes_per_s, io_bytes_per_s, isolation) = c;
    Ok(contract(cpus, memory, net_bytes_per_s)?
        .io_bytes_per_s(io_bytes_per_s)
        .isolation(isolation.parse().map_err(argument)?))
}
