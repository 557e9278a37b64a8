//! What a job's tasks report to [`heddle_comm::metrics`]: the graph, each instance's
//! records in and out, and whether its senders wait for room on their edges.

use std::sync::Arc;

use heddle_comm::metrics::{self, EdgeCounters, Graph, GraphEdge, TaskCounters, Vertex};

use crate::graph::TaskGraph;

/// The graph as the dashboard draws it.
pub(crate) fn graph(graph: &TaskGraph) -> Graph {
    Graph {
        vertices: graph
            .vertices
            .iter()
            .map(|v| Vertex { name: v.name.clone(), parallelism: v.parallelism })
            .collect(),
        edges: graph
            .edges
            .iter()
            .map(|e| GraphEdge {
                from: graph.vertices[e.from].name.clone(),
                to: graph.vertices[e.to].name.clone(),
                operation: <&str>::from(e.kind).to_string(),
            })
            .collect(),
    }
}

/// One task instance's live counters.
#[derive(Debug)]
pub(crate) struct Observed {
    live: Arc<TaskCounters>,
    /// The edges out of the task's vertex, and whether this instance waits on them.
    waits: Vec<(Arc<EdgeCounters>, bool)>,
}

impl Observed {
    /// An instance of vertex `v` counting into `live`.
    pub(crate) fn new(graph: &TaskGraph, v: usize, live: Arc<TaskCounters>) -> Observed {
        let name = &graph.vertices[v].name;
        let waits = graph
            .edges
            .iter()
            .filter(|e| e.from == v)
            .map(|e| (metrics::edge(&format!("{name} -> {}", graph.vertices[e.to].name)), false))
            .collect();
        Observed { live, waits }
    }

    /// `n` records taken in.
    pub(crate) fn took(&self, n: u64) {
        self.live.add_in(n);
    }

    /// `n` records given out.
    pub(crate) fn gave(&self, n: u64) {
        self.live.add_out(n);
    }

    /// The task's outputs have room (`true`) or it waits for them.
    pub(crate) fn room(&mut self, room: bool) {
        for (edge, was) in &mut self.waits {
            edge.set_waiting(!room, was);
        }
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.room(true);
    }
}
