//! Bridged tasks: a vertex whose instances are processes in another language, each
//! speaking the bridge protocol (`spec/bridge.md`) through [`heddle_bridge::Bridge`]. The
//! DataCutter life cycle maps onto the task's: the process starts (its `init` runs) before
//! the first record, each record is sent as it arrives and results are emitted as they come
//! back, and the end of the input runs the filter's `finalize`, whose results are emitted
//! too. A filter that fails ends the task with the bridge's error, carried whole.

use std::marker::PhantomData;

use heddle_bridge::{Bridge, BridgeConfig, FilterCommand, FromRecord, IntoRecord, Record};

use crate::{Compute, Context, Error, Result, TaskGraph, Vertex};

/// The task behind [`TaskGraph::bridge`] (and the data API's `pipe`): one filter process
/// per instance, taking `I`s as records and emitting its results as `O`s.
#[derive(Debug)]
pub struct BridgeTask<I = Record, O = Record> {
    command: FilterCommand,
    config: BridgeConfig,
    bridge: Option<Bridge>,
    _io: PhantomData<fn(I) -> O>,
}

impl<I, O> BridgeTask<I, O> {
    /// A task running `command` with `config` (its task name, instance and bridge id are
    /// filled in from the task instance).
    pub fn new(command: FilterCommand, config: BridgeConfig) -> Self {
        BridgeTask { command, config, bridge: None, _io: PhantomData }
    }

    fn bridge(&mut self, ctx: &Context<'_, O>) -> Result<&Bridge> {
        if self.bridge.is_none() {
            let info = ctx.info();
            let mut cfg = self.config.clone();
            cfg.task.clone_from(&info.name);
            cfg.instance = info.index;
            cfg.parallelism = info.parallelism;
            cfg.bridge_id = info.task;
            let b = Bridge::start(&self.command, cfg).map_err(|e| Error::raised("Bridge", e))?;
            self.bridge = Some(b);
        }
        self.bridge.as_ref().ok_or_else(|| Error::Plan("the bridge did not start".into()))
    }
}

/// Emits `records` as `O`s, or fails naming the first that is not one.
fn emit_all<O: FromRecord>(ctx: &mut Context<'_, O>, records: Vec<Record>) -> Result<()> {
    for r in records {
        let o = O::from_record(r).map_err(|detail| {
            let expected = std::any::type_name::<O>();
            Error::raised("Bridge", heddle_bridge::Error::Decode { expected, detail })
        })?;
        ctx.emit(o);
    }
    Ok(())
}

impl<I: IntoRecord + Send + 'static, O: FromRecord + Send + 'static> Compute for BridgeTask<I, O> {
    type In = I;
    type Out = O;

    fn prepare(&mut self, ctx: &mut Context<'_, O>) -> Result<()> {
        self.bridge(ctx).map(|_| ())
    }

    fn execute(&mut self, ctx: &mut Context<'_, O>, input: I) -> Result<()> {
        let mut out = Vec::new();
        self.bridge(ctx)?
            .send(input.into_record(), &mut |r| out.push(r))
            .map_err(|e| Error::raised("Bridge", e))?;
        emit_all(ctx, out)
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, O>) -> Result<()> {
        self.bridge(ctx)?;
        let Some(bridge) = self.bridge.take() else { return Ok(()) };
        let mut out = Vec::new();
        let report = bridge.finish(&mut |r| out.push(r)).map_err(|e| Error::raised("Bridge", e))?;
        tracing::debug!(task = %ctx.info(), records_in = report.records_in, records_out = report.records_out,
            p50_us = report.diagnostics.latency_p50_us, "bridge finished");
        emit_all(ctx, out)
    }

    fn close(&mut self, _ctx: &mut Context<'_, O>) -> Result<()> {
        if let Some(b) = self.bridge.take() {
            b.abort("the task closed");
        }
        Ok(())
    }
}

impl TaskGraph {
    /// A vertex of `parallelism` instances, each the process `command` in any language
    /// speaking the bridge protocol (an SDK's filter), over pipes by default. Records are
    /// [`heddle_bridge::Record`]s: bytes or typed, with an optional key (partition on it
    /// with `Edge::partition`).
    pub fn bridge(
        &mut self,
        name: &str,
        parallelism: u32,
        command: FilterCommand,
    ) -> Vertex<Record, Record> {
        self.bridge_with(name, parallelism, command, BridgeConfig::new(name))
    }

    /// As [`TaskGraph::bridge`], with the bridge's settings (transport, `init` arguments,
    /// credits, limits, timeouts).
    pub fn bridge_with(
        &mut self,
        name: &str,
        parallelism: u32,
        command: FilterCommand,
        config: BridgeConfig,
    ) -> Vertex<Record, Record> {
        self.compute(name, parallelism, move |_| {
            BridgeTask::<Record, Record>::new(command.clone(), config.clone())
        })
    }
}
