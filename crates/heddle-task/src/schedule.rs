//! Schedulers: where each task instance runs. Every scheduler is a pure function of the
//! graph and the workers, so every worker computes the same plan without talking.

use crate::{Error, Resources, Result, WorkerSpec};

/// One vertex as schedulers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexShape {
    /// Its name.
    pub name: String,
    /// Its instances.
    pub parallelism: u32,
    /// What each instance requests.
    pub resources: Resources,
}

/// Places task instances on workers.
pub trait Scheduler: std::fmt::Debug {
    /// For each vertex, the worker (index into `workers`) of each instance.
    ///
    /// # Errors
    /// [`Error::Plan`] naming the first task that does not fit and the shortfall.
    fn place(&self, vertices: &[VertexShape], workers: &[WorkerSpec]) -> Result<Vec<Vec<usize>>>;
}

/// What is left of each worker as tasks are placed.
struct Capacity {
    cpu: Vec<f64>,
    memory: Vec<u64>,
}

impl Capacity {
    fn new(workers: &[WorkerSpec]) -> Result<Capacity> {
        if workers.is_empty() {
            return Err(Error::Plan("there are no workers to place tasks on".into()));
        }
        Ok(Capacity {
            cpu: workers.iter().map(|w| w.cpus).collect(),
            memory: workers.iter().map(|w| w.memory).collect(),
        })
    }

    fn fits(&self, w: usize, r: &Resources) -> bool {
        self.cpu[w] + 1e-9 >= r.cpus && self.memory[w] >= r.memory
    }

    fn take(&mut self, w: usize, r: &Resources) {
        self.cpu[w] -= r.cpus;
        self.memory[w] -= r.memory.min(self.memory[w]);
    }

    /// The error for a task that fits nowhere: what it asks, the most any worker has left.
    fn shortfall(&self, name: &str, index: u32, r: &Resources, only: Option<&[usize]>) -> Error {
        let ws: Vec<usize> = only.map_or_else(|| (0..self.cpu.len()).collect(), <[usize]>::to_vec);
        let cpu = ws.iter().map(|&w| self.cpu[w]).fold(0.0, f64::max);
        let mem = ws.iter().map(|&w| self.memory[w]).max().unwrap_or(0);
        let mut short = Vec::new();
        if r.cpus > cpu + 1e-9 {
            short.push(format!(
                "{} cpu (asks {}, at most {cpu} free on a worker)",
                r.cpus - cpu,
                r.cpus
            ));
        }
        if r.memory > mem {
            short.push(format!(
                "{} of memory (asks {}, at most {} free on a worker)",
                crate::format_bytes(r.memory - mem),
                crate::format_bytes(r.memory),
                crate::format_bytes(mem)
            ));
        }
        if short.is_empty() {
            short.push("no single worker has both the cpu and the memory it asks".into());
        }
        Error::Plan(format!("task {name}[{index}] does not fit: short by {}", short.join(" and ")))
    }
}

/// Instance `i` of every vertex on worker `i mod workers` (instances of one-to-one
/// vertices end up together, so direct edges chain). Memory requests are checked;
/// cpu may be shared.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobin;

impl Scheduler for RoundRobin {
    fn place(&self, vertices: &[VertexShape], workers: &[WorkerSpec]) -> Result<Vec<Vec<usize>>> {
        place_each(vertices, workers, |v, i, cap| {
            let w = i as usize % workers.len();
            let r = Resources { cpus: 0.0, ..v.resources.clone() };
            if cap.fits(w, &r) {
                Ok((w, r))
            } else {
                Err(cap.shortfall(&v.name, i, &r, Some(&[w])))
            }
        })
    }
}

/// Places every instance of every vertex in order: `pick` chooses a worker (and the
/// resources it takes there) given what is left.
fn place_each(
    vertices: &[VertexShape],
    workers: &[WorkerSpec],
    mut pick: impl FnMut(&VertexShape, u32, &Capacity) -> Result<(usize, Resources)>,
) -> Result<Vec<Vec<usize>>> {
    let mut cap = Capacity::new(workers)?;
    let mut plan = Vec::new();
    for v in vertices {
        let mut ws = Vec::new();
        for i in 0..v.parallelism {
            let (w, taken) = pick(v, i, &cap)?;
            cap.take(w, &taken);
            ws.push(w);
        }
        plan.push(ws);
    }
    Ok(plan)
}

/// Bin-packing: each instance, in vertex order, on the first worker with enough cpu and
/// memory left.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstFit;

impl Scheduler for FirstFit {
    fn place(&self, vertices: &[VertexShape], workers: &[WorkerSpec]) -> Result<Vec<Vec<usize>>> {
        place_each(vertices, workers, |v, i, cap| {
            let w = (0..workers.len())
                .find(|&w| cap.fits(w, &v.resources))
                .ok_or_else(|| cap.shortfall(&v.name, i, &v.resources, None))?;
            Ok((w, v.resources.clone()))
        })
    }
}

/// Data locality: instances of a vertex whose request names hosts go, round-robin, to
/// workers on those hosts with room (cpu and memory); others, and any that do not fit
/// there, to the worker with the most free cpu.
#[derive(Debug, Clone, Copy, Default)]
pub struct DataLocality;

impl Scheduler for DataLocality {
    fn place(&self, vertices: &[VertexShape], workers: &[WorkerSpec]) -> Result<Vec<Vec<usize>>> {
        place_each(vertices, workers, |v, i, cap| {
            let local: Vec<usize> = (0..workers.len())
                .filter(|&w| v.resources.hosts.contains(&workers[w].host))
                .collect();
            let n = local.len();
            let near =
                (0..n).map(|k| local[(i as usize + k) % n]).find(|&w| cap.fits(w, &v.resources));
            let w = near
                .or_else(|| {
                    (0..workers.len())
                        .filter(|&w| cap.fits(w, &v.resources))
                        .max_by(|&a, &b| cap.cpu[a].total_cmp(&cap.cpu[b]).then(b.cmp(&a)))
                })
                .ok_or_else(|| cap.shortfall(&v.name, i, &v.resources, None))?;
            Ok((w, v.resources.clone()))
        })
    }
}
