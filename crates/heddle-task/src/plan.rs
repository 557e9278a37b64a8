//! The execution graph: every task instance with its id and worker, and how each edge
//! runs (through a dataflow operation, or chained in memory).

use std::fmt;

use heddle_dataflow::{Placement, TaskId};

use crate::edge::EdgeKind;
use crate::schedule::VertexShape;
use crate::{Result, Scheduler, TaskGraph, VertexKind, WorkerSpec};

/// One planned edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEdge {
    /// Upstream vertex.
    pub from: usize,
    /// Downstream vertex.
    pub to: usize,
    /// The operation.
    pub kind: EdgeKind,
    /// Whether records pass in memory between co-located instances (no operation).
    pub chained: bool,
}

/// Where every task instance runs. Deterministic: every worker computes the same one.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Names, kinds and parallelism of the vertices.
    pub vertices: Vec<(String, VertexKind, u32)>,
    /// Task id of instance 0 of each vertex (instance i is `first + i`).
    pub first_task: Vec<TaskId>,
    /// For each vertex, the worker of each instance.
    pub workers: Vec<Vec<usize>>,
    /// The edges.
    pub edges: Vec<PlannedEdge>,
    /// The workers planned for.
    pub world: Vec<WorkerSpec>,
    /// The vertices whose instances run as isolated processes, with their contracts.
    pub isolated: Vec<(usize, crate::Resources)>,
    /// Every vertex's name and contract.
    pub(crate) contracts: Vec<(String, crate::Resources)>,
    scheduler: String,
}

impl Plan {
    /// Plans `graph` on `workers` with `scheduler`.
    ///
    /// # Errors
    /// [`crate::Error::Graph`] for a malformed graph, [`crate::Error::Plan`] for a
    /// request that fits no worker (naming the task and the shortfall).
    pub fn new(
        graph: &TaskGraph,
        workers: &[WorkerSpec],
        scheduler: &dyn Scheduler,
    ) -> Result<Plan> {
        graph.validate()?;
        crate::expected::validate(graph)?;
        let shapes: Vec<VertexShape> = graph
            .vertices
            .iter()
            .map(|v| VertexShape {
                name: v.name.clone(),
                parallelism: v.parallelism,
                resources: v.resources.clone(),
            })
            .collect();
        let placed = scheduler.place(&shapes, workers)?;
        let mut first_task = Vec::new();
        let mut next = 0;
        for v in &graph.vertices {
            first_task.push(next);
            next += v.parallelism;
        }
        let edges = graph
            .edges
            .iter()
            .map(|e| PlannedEdge {
                from: e.from,
                to: e.to,
                kind: e.kind,
                chained: e.chainable && placed[e.from] == placed[e.to],
            })
            .collect();
        Ok(Plan {
            vertices: (0..graph.vertices.len())
                .map(|v| {
                    (
                        graph.vertices[v].name.clone(),
                        graph.kind_of(v),
                        graph.vertices[v].parallelism,
                    )
                })
                .collect(),
            first_task,
            workers: placed,
            edges,
            world: workers.to_vec(),
            isolated: graph
                .vertices
                .iter()
                .enumerate()
                .filter(|(_, v)| v.isolable && crate::isolation::runs_as_process(&v.resources))
                .map(|(i, v)| (i, v.resources.clone()))
                .collect(),
            contracts: graph
                .vertices
                .iter()
                .map(|v| (v.name.clone(), v.resources.clone()))
                .collect(),
            scheduler: format!("{scheduler:?}"),
        })
    }

    /// The task ids of vertex `v`'s instances.
    pub fn tasks(&self, v: usize) -> Vec<TaskId> {
        (0..self.vertices[v].2).map(|i| self.first_task[v] + i).collect()
    }

    /// The placement of every task on workers.
    pub fn placement(&self) -> Placement {
        let ranks = self.world.iter().map(|w| w.rank).collect::<Vec<_>>();
        Placement::from_pairs(
            self.workers
                .iter()
                .enumerate()
                .flat_map(|(v, ws)| {
                    ws.iter().enumerate().map(move |(i, &w)| (self.first_task[v] + i as u32, w))
                })
                .map(|(t, w)| (t, ranks[w])),
        )
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "plan ({}) on {} workers:", self.scheduler, self.world.len())?;
        for (w, spec) in self.world.iter().enumerate() {
            let tasks: Vec<String> = self
                .workers
                .iter()
                .enumerate()
                .flat_map(|(v, ws)| {
                    ws.iter()
                        .enumerate()
                        .filter(move |(_, &x)| x == w)
                        .map(move |(i, _)| format!("{}[{i}]", self.vertices[v].0))
                })
                .collect();
            writeln!(
                f,
                "  worker {} ({}, {} cpu, {} MiB): {}",
                spec.rank,
                spec.host,
                spec.cpus,
                spec.memory >> 20,
                tasks.join(" ")
            )?;
        }
        for (v, r) in &self.isolated {
            let io = match r.io_bytes_per_s {
                0 => String::new(),
                rate => format!(", {}/s of I/O per device", crate::format_bytes(rate)),
            };
            writeln!(
                f,
                "  vertex {}: isolated processes, each confined to {} cores and {} of memory{io}",
                self.vertices[*v].0,
                r.cpus,
                if r.memory > 0 { crate::format_bytes(r.memory) } else { "any amount".into() },
            )?;
        }
        if !self.isolated.is_empty() {
            let c = crate::isolation::COSTS;
            writeln!(
                f,
                "  isolation costs ({}): start {} ms a process vs {} ms a thread; {} ns vs {} ns \
                 a record",
                c.measured,
                c.process_start_ms,
                c.thread_start_ms,
                c.process_record_ns,
                c.thread_record_ns
            )?;
        }
        for (v, (name, contract)) in self.contracts.iter().enumerate() {
            let isolated = self.isolated.iter().any(|(i, _)| *i == v);
            if let Some(line) = crate::expected::describe(name, contract, isolated) {
                writeln!(f, "{line}")?;
            }
        }
        for e in &self.edges {
            let how = if e.chained { "chained in memory" } else { "dataflow operation" };
            writeln!(
                f,
                "  edge {} -> {}: {:?} ({how})",
                self.vertices[e.from].0, self.vertices[e.to].0, e.kind
            )?;
        }
        Ok(())
    }
}
