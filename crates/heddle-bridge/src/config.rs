//! A bridge's settings.

use std::time::Duration;

use crate::Transport;

/// How to run one instance of a bridged task.
///
/// ```
/// use heddle_bridge::{BridgeConfig, Transport};
/// let c = BridgeConfig::new("lower").transport(Transport::Unix).args(["--min", "3"]);
/// assert_eq!(c.credits, 64);
/// ```
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Task name (shown in errors, given to `init`).
    pub task: String,
    /// This instance's index.
    pub instance: u32,
    /// Instances of the task.
    pub parallelism: u32,
    /// Arguments for the filter's `init`.
    pub args: Vec<String>,
    /// The transport of the first channel.
    pub transport: Transport,
    /// Records each side may have in flight.
    pub credits: u32,
    /// Largest record either way, in bytes.
    pub max_record: u64,
    /// Largest payload of one frame.
    pub frame_payload: u32,
    /// Time the filter has to connect, initialize and start.
    pub start_timeout: Duration,
    /// Time the filter may go without answering while the host waits for it (a hung
    /// filter is killed after it).
    pub idle_timeout: Duration,
    /// Grace between SIGTERM and SIGKILL when stopping it.
    pub kill_grace: Duration,
    /// The bridge id (the `edge` of its frames).
    pub bridge_id: u32,
    /// Rules that switch the transport while the bridge runs.
    pub policy: Option<crate::Policy>,
}

impl BridgeConfig {
    /// Defaults for task `task`: one instance, pipes, 64 credits, 64 MiB records, 1 MiB
    /// frames, 30 s to start, 60 s idle.
    pub fn new(task: impl Into<String>) -> BridgeConfig {
        BridgeConfig {
            task: task.into(),
            instance: 0,
            parallelism: 1,
            args: Vec::new(),
            transport: Transport::Pipe,
            credits: 64,
            max_record: 64 << 20,
            frame_payload: 1 << 20,
            start_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            kill_grace: Duration::from_secs(1),
            bridge_id: 1,
            policy: None,
        }
    }

    /// Sets the transport.
    #[must_use]
    pub fn transport(mut self, t: Transport) -> BridgeConfig {
        self.transport = t;
        self
    }

    /// Sets `init`'s arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, a: I) -> BridgeConfig {
        self.args = a.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the instance and the parallelism.
    #[must_use]
    pub fn instance(mut self, instance: u32, parallelism: u32) -> BridgeConfig {
        self.instance = instance;
        self.parallelism = parallelism;
        self
    }

    /// Sets the credit window.
    #[must_use]
    pub fn credits(mut self, credits: u32) -> BridgeConfig {
        self.credits = credits.max(1);
        self
    }

    /// Sets the largest record.
    #[must_use]
    pub fn max_record(mut self, bytes: u64) -> BridgeConfig {
        self.max_record = bytes;
        self
    }

    /// Sets the switching policy.
    #[must_use]
    pub fn policy(mut self, policy: crate::Policy) -> BridgeConfig {
        self.policy = Some(policy);
        self
    }

    /// `task#instance`, as errors show it.
    pub fn label(&self) -> String {
        format!("{}#{}", self.task, self.instance)
    }
}
