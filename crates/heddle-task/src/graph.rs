//! The task graph builder: vertices (sources and compute tasks, with parallelism and a
//! resource request) and the edges between them.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use heddle_comm::Communicator;

use crate::edge::{Edge, EdgeKind};
use crate::exec::edge_run::EdgeFactory;
use crate::exec::inbox::new_inbox;
use crate::exec::outputs::TaskOutput;
use crate::exec::task_run::{ComputeRun, SourceRun, TaskRun};
use crate::{Compute, Error, Resources, Result, Source, Strategy, TaskInfo};

/// Whether a vertex produces, transforms or only consumes records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VertexKind {
    /// Produces records ([`Source`]).
    Source,
    /// Receives and emits records ([`Compute`]).
    Compute,
    /// A compute vertex without outgoing edges.
    Sink,
}

/// A handle on a vertex receiving `I` and emitting `O`, to connect it.
#[derive(Debug)]
pub struct Vertex<I, O> {
    pub(crate) id: usize,
    _io: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for Vertex<I, O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I, O> Copy for Vertex<I, O> {}

impl<I, O> Vertex<I, O> {
    /// The vertex's position in its graph.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The same vertex seen only as a producer of `O` (to connect from, without naming
    /// its input type).
    pub fn output(&self) -> Vertex<(), O> {
        Vertex { id: self.id, _io: PhantomData }
    }
}

/// Builds a task instance, linking its type-erased ports.
pub(crate) trait VertexFactory {
    /// A fresh inbox for one instance (`None` for a source).
    fn inbox(&self) -> Option<(Box<dyn Any>, Box<dyn Any>)>;
    /// The instance `info`, with its inbox (from `inbox`), its number of incoming edges
    /// and its outgoing ports.
    fn build(
        &self,
        info: TaskInfo,
        inbox: Option<Box<dyn Any>>,
        inputs: usize,
        outs: Vec<Box<dyn Any>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Result<Box<dyn TaskRun>>;
}

fn outputs<O: Send + 'static>(outs: Vec<Box<dyn Any>>) -> Result<Vec<Arc<dyn TaskOutput<O>>>> {
    outs.into_iter()
        .map(|o| {
            o.downcast::<Arc<dyn TaskOutput<O>>>().map(|b| *b).map_err(|_| {
                Error::Graph("an edge's input type does not match its task's output type".into())
            })
        })
        .collect()
}

struct SourceFactory<F>(F);

impl<S: Source, F: Fn(u32) -> S> VertexFactory for SourceFactory<F>
where
    S::Out: Clone,
{
    fn inbox(&self) -> Option<(Box<dyn Any>, Box<dyn Any>)> {
        None
    }

    fn build(
        &self,
        info: TaskInfo,
        _: Option<Box<dyn Any>>,
        _: usize,
        outs: Vec<Box<dyn Any>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Result<Box<dyn TaskRun>> {
        let task = (self.0)(info.index);
        Ok(Box::new(SourceRun::new(task, info, outputs(outs)?, strategy, comm)))
    }
}

struct ComputeFactory<C, F>(F, PhantomData<fn() -> C>);

impl<C: Compute, F: Fn(u32) -> C> VertexFactory for ComputeFactory<C, F>
where
    C::Out: Clone,
{
    fn inbox(&self) -> Option<(Box<dyn Any>, Box<dyn Any>)> {
        let (inbox, erased) = new_inbox::<C::In>();
        Some((Box::new(inbox), erased))
    }

    fn build(
        &self,
        info: TaskInfo,
        inbox: Option<Box<dyn Any>>,
        inputs: usize,
        outs: Vec<Box<dyn Any>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Result<Box<dyn TaskRun>> {
        let inbox = inbox
            .and_then(|b| b.downcast::<crate::exec::inbox::SharedInbox<C::In>>().ok())
            .ok_or_else(|| Error::Graph(format!("task {info} has no inbox of its input type")))?;
        let task = (self.0)(info.index);
        Ok(Box::new(ComputeRun::new(task, info, *inbox, inputs, outputs(outs)?, strategy, comm)))
    }
}

/// One vertex of the graph.
pub(crate) struct VertexDef {
    pub(crate) name: String,
    pub(crate) kind: VertexKind,
    pub(crate) parallelism: u32,
    pub(crate) resources: Resources,
    pub(crate) collective: bool,
    pub(crate) strategy: Strategy,
    pub(crate) factory: Box<dyn VertexFactory>,
    /// Built by [`TaskGraph::isolated`]: its instances may run as processes.
    pub(crate) isolable: bool,
}

/// One edge of the graph.
pub(crate) struct EdgeDef {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) kind: EdgeKind,
    pub(crate) chainable: bool,
    pub(crate) factory: Box<dyn EdgeFactory>,
}

/// A graph of tasks, built with [`TaskGraph::source`], [`TaskGraph::compute`] and
/// [`TaskGraph::connect`]; planned with a [`crate::Scheduler`] and run by a
/// [`crate::Job`].
#[derive(Default)]
pub struct TaskGraph {
    pub(crate) vertices: Vec<VertexDef>,
    pub(crate) edges: Vec<EdgeDef>,
    /// Why the job's default contract could not be read ([`Resources::job_default`]).
    bad_default: Option<String>,
}

impl std::fmt::Debug for TaskGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vs: Vec<(&str, u32)> =
            self.vertices.iter().map(|v| (v.name.as_str(), v.parallelism)).collect();
        let es: Vec<(usize, usize, EdgeKind)> =
            self.edges.iter().map(|e| (e.from, e.to, e.kind)).collect();
        f.debug_struct("TaskGraph").field("vertices", &vs).field("edges", &es).finish()
    }
}

impl TaskGraph {
    /// An empty graph.
    pub fn new() -> TaskGraph {
        TaskGraph::default()
    }

    fn add(
        &mut self,
        name: &str,
        kind: VertexKind,
        parallelism: u32,
        factory: Box<dyn VertexFactory>,
    ) -> usize {
        let mut resources = Resources::job_default().unwrap_or_else(|e| {
            self.bad_default.get_or_insert(e);
            Resources::default()
        });
        // The job's default isolation is for isolated vertices ([`TaskGraph::isolated`]).
        resources.isolation = crate::Isolation::Auto;
        self.vertices.push(VertexDef {
            name: name.to_string(),
            kind,
            parallelism,
            resources,
            collective: false,
            strategy: Strategy::default(),
            factory,
            isolable: false,
        });
        self.vertices.len() - 1
    }

    /// A source vertex of `parallelism` instances; `make(i)` builds instance `i`.
    pub fn source<S: Source>(
        &mut self,
        name: &str,
        parallelism: u32,
        make: impl Fn(u32) -> S + 'static,
    ) -> Vertex<(), S::Out>
    where
        S::Out: Clone,
    {
        let id = self.add(name, VertexKind::Source, parallelism, Box::new(SourceFactory(make)));
        Vertex { id, _io: PhantomData }
    }

    /// A compute vertex (a sink if nothing connects from it) of `parallelism` instances;
    /// `make(i)` builds instance `i`.
    pub fn compute<C: Compute>(
        &mut self,
        name: &str,
        parallelism: u32,
        make: impl Fn(u32) -> C + 'static,
    ) -> Vertex<C::In, C::Out>
    where
        C::Out: Clone,
    {
        let id = self.add(
            name,
            VertexKind::Compute,
            parallelism,
            Box::new(ComputeFactory(make, PhantomData)),
        );
        Vertex { id, _io: PhantomData }
    }

    /// A compute vertex whose instances run as its resources' [`crate::Isolation`] says:
    /// threads, or child processes confined to the vertex's contract (its records cross
    /// shared memory, so they must serialize). See [`crate::Isolated`].
    pub fn isolated<C: Compute>(
        &mut self,
        name: &str,
        parallelism: u32,
        make: impl Fn(u32) -> C + 'static,
    ) -> Vertex<C::In, C::Out>
    where
        C::In: serde::Serialize + serde::de::DeserializeOwned,
        C::Out: Clone + serde::Serialize + serde::de::DeserializeOwned,
    {
        let v = self.isolable(name, parallelism, make);
        if let Ok(d) = Resources::job_default() {
            self.vertices[v.id].resources.isolation = d.isolation;
        }
        v
    }

    /// As [`TaskGraph::isolated`], but its instances are threads until its own contract
    /// ([`TaskGraph::resources`]) asks for a process: the job's default contract (config
    /// file, `HEDDLE_TASK_*`) does not make them processes. For vertices a library adds
    /// on its users' behalf, such as a data set's record-wise stages.
    ///
    /// ```
    /// use heddle_task::{Isolation, Resources, TaskGraph};
    /// # use heddle_task::{Compute, Context, Result};
    /// # struct Double;
    /// # impl Compute for Double {
    /// #     type In = u64;
    /// #     type Out = u64;
    /// #     fn execute(&mut self, ctx: &mut Context<'_, u64>, x: u64) -> Result<()> {
    /// #         ctx.emit(2 * x);
    /// #         Ok(())
    /// #     }
    /// # }
    /// let mut g = TaskGraph::new();
    /// let v = g.isolable("double", 2, |_| Double);
    /// g.resources(&v, Resources::new(1.0, 64 << 20).isolation(Isolation::Process));
    /// ```
    pub fn isolable<C: Compute>(
        &mut self,
        name: &str,
        parallelism: u32,
        make: impl Fn(u32) -> C + 'static,
    ) -> Vertex<C::In, C::Out>
    where
        C::In: serde::Serialize + serde::de::DeserializeOwned,
        C::Out: Clone + serde::Serialize + serde::de::DeserializeOwned,
    {
        let v = self.compute(name, parallelism, move |i| crate::Isolated::new(make(i)));
        let def = &mut self.vertices[v.id];
        def.isolable = true;
        def.resources.isolation = crate::Isolation::Thread;
        Vertex { id: v.id, _io: PhantomData }
    }

    /// Connects `from`'s output to `to`'s input through `edge`.
    pub fn connect<A, T: Send + 'static, U: Send + 'static, B>(
        &mut self,
        from: &Vertex<A, T>,
        to: &Vertex<U, B>,
        edge: Edge<T, U>,
    ) -> &mut Self {
        let chainable = edge.chain.is_some();
        self.edges.push(EdgeDef {
            from: from.id,
            to: to.id,
            kind: edge.kind,
            chainable,
            factory: Box::new(edge),
        });
        self
    }

    /// Sets the resources each instance of `vertex` requests.
    pub fn resources<I, O>(&mut self, vertex: &Vertex<I, O>, resources: Resources) -> &mut Self {
        self.vertices[vertex.id].resources = resources;
        self
    }

    /// Sets the strategy instances of `vertex` start with.
    pub fn strategy<I, O>(&mut self, vertex: &Vertex<I, O>, strategy: Strategy) -> &mut Self {
        self.vertices[vertex.id].strategy = strategy;
        self
    }

    /// Gives the instances of `vertex` a communicator of their own (rank = instance
    /// index) for BSP collectives inside the tasks ([`crate::Context::comm`]). Needs at
    /// most one instance of the vertex per worker.
    pub fn collective<I, O>(&mut self, vertex: &Vertex<I, O>) -> &mut Self {
        self.vertices[vertex.id].collective = true;
        self
    }

    /// Checks the graph: names, parallelism, edges between known vertices, no edge into
    /// a source, every compute vertex fed, no cycle, direct edges between equal parallelism.
    ///
    /// # Errors
    /// [`Error::Graph`] naming the problem.
    pub fn validate(&self) -> Result<()> {
        if let Some(e) = &self.bad_default {
            return Err(Error::Graph(format!("the job's default task contract: {e}")));
        }
        for (i, v) in self.vertices.iter().enumerate() {
            if v.parallelism == 0 {
                return Err(Error::Graph(format!(
                    "vertex '{}' has parallelism 0; give it at least 1",
                    v.name
                )));
            }
            let cpu = v.resources.cpus;
            if !(cpu.is_finite() && cpu > 0.0) {
                return Err(Error::Graph(format!(
                    "vertex '{}' requests {cpu} cores; request more than 0 (e.g. 0.5)",
                    v.name
                )));
            }
            if v.resources.isolation == crate::Isolation::Process && !v.isolable {
                return Err(Error::Graph(format!(
                    "vertex '{}' asks to run as an isolated process, which only compute \
                     vertices built with TaskGraph::isolated or ::isolable can: a data \
                     set's stages made by map, filter, flat_map, map_partitions, \
                     reduce_by_key and the like, not its sources, joins, unions or actions",
                    v.name
                )));
            }
            if v.isolable && v.collective {
                return Err(Error::Graph(format!(
                    "vertex '{}' is isolated and collective; an isolated process has no \
                     communicator: drop one of the two",
                    v.name
                )));
            }
            if self.vertices[..i].iter().any(|w| w.name == v.name) {
                return Err(Error::Graph(format!(
                    "two vertices are named '{}'; names must be unique",
                    v.name
                )));
            }
            let inputs = self.edges.iter().filter(|e| e.to == i).count();
            if v.kind != VertexKind::Source && inputs == 0 {
                return Err(Error::Graph(format!(
                    "compute vertex '{}' has no input; connect an edge to it",
                    v.name
                )));
            }
        }
        for e in &self.edges {
            let (from, to) = (&self.vertices[e.from], &self.vertices[e.to]);
            if to.kind == VertexKind::Source {
                return Err(Error::Graph(format!(
                    "edge '{}' -> '{}' leads into a source",
                    from.name, to.name
                )));
            }
            if e.kind == EdgeKind::Direct && from.parallelism != to.parallelism {
                return Err(Error::Graph(format!(
                    "direct edge '{}' -> '{}' joins {} instances to {}; direct needs equal \
                     parallelism",
                    from.name, to.name, from.parallelism, to.parallelism
                )));
            }
        }
        // Kahn's algorithm: every vertex must be reachable in topological order.
        let mut indegree: Vec<usize> = (0..self.vertices.len())
            .map(|v| self.edges.iter().filter(|e| e.to == v).count())
            .collect();
        let mut ready: Vec<usize> =
            (0..self.vertices.len()).filter(|&v| indegree[v] == 0).collect();
        let mut seen = 0;
        while let Some(v) = ready.pop() {
            seen += 1;
            for e in self.edges.iter().filter(|e| e.from == v) {
                indegree[e.to] -= 1;
                if indegree[e.to] == 0 {
                    ready.push(e.to);
                }
            }
        }
        if seen != self.vertices.len() {
            return Err(Error::Graph(
                "the graph has a cycle; loops are run as iterations of an acyclic graph \
                 (Job::iterate)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The kind of vertex `v`, a compute vertex without outgoing edges being a sink.
    pub(crate) fn kind_of(&self, v: usize) -> VertexKind {
        match self.vertices[v].kind {
            VertexKind::Compute if !self.edges.iter().any(|e| e.from == v) => VertexKind::Sink,
            k => k,
        }
    }
}
