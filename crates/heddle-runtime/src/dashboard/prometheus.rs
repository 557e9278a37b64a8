//! `GET /metrics`: the job's metrics in the OpenMetrics text format (which Prometheus
//! scrapes), encoded by `prometheus-client` from the workers' last snapshots.

use std::collections::BTreeMap;

use heddle_comm::metrics::LATENCY_BUCKETS;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::observatory::State;

type Labels = Vec<(&'static str, String)>;

/// A histogram's buckets (not cumulative; the last is `+Inf`), sum and count.
#[derive(Debug, Clone)]
struct Histogram {
    buckets: Vec<u64>,
    sum: f64,
}

impl Histogram {
    fn encode(&self, m: &mut prometheus_client::encoding::MetricEncoder<'_>) -> std::fmt::Result {
        // Per bucket, not cumulative (the encoder sums them); `f64::MAX` is its `+Inf`.
        let bounds: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &n)| (LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::MAX), n))
            .collect();
        m.encode_histogram::<NoLabelSet>(self.sum, self.buckets.iter().sum(), &bounds, None)
    }
}

/// The values of one scrape.
#[derive(Debug, Default)]
struct Scrape {
    attempt: u64,
    workers: u64,
    records_in: Vec<(Labels, u64)>,
    records_out: Vec<(Labels, u64)>,
    bytes_in: Vec<(Labels, u64)>,
    bytes_out: Vec<(Labels, u64)>,
    backpressure: Vec<(Labels, f64)>,
    bytes_sent: BTreeMap<String, u64>,
    collectives: Vec<(Labels, Histogram)>,
    resident: Vec<(Labels, u64)>,
    cpu: Vec<(Labels, f64)>,
    checkpoints: Option<Histogram>,
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let attempt = "The job's attempt (0 first; each restart adds one)";
        e.encode_descriptor("heddle_job_attempt", attempt, None, MetricType::Gauge)?
            .encode_gauge(&self.attempt)?;
        e.encode_descriptor("heddle_workers", "Workers of the job", None, MetricType::Gauge)?
            .encode_gauge(&self.workers)?;
        counters(&mut e, "heddle_task_records_in", "Records a task took in", &self.records_in)?;
        counters(&mut e, "heddle_task_records_out", "Records a task gave out", &self.records_out)?;
        let help = "Serialized bytes a task took from its input edges";
        counters(&mut e, "heddle_task_bytes_in", help, &self.bytes_in)?;
        let help = "Serialized bytes a task sent on its output edges";
        counters(&mut e, "heddle_task_bytes_out", help, &self.bytes_out)?;
        let help = "Share of the last interval the edge's senders waited for credit";
        gauges(&mut e, "heddle_edge_backpressure_ratio", help, None, &self.backpressure)?;
        let help = "Bytes the workers sent, by transport";
        let mut m = e.encode_descriptor("heddle_bytes_sent", help, None, MetricType::Counter)?;
        for (transport, v) in &self.bytes_sent {
            m.encode_family(&vec![("transport", transport.clone())])?
                .encode_counter::<NoLabelSet, _, u64>(v, None)?;
        }
        let help = "Collective calls' latency, by operation and algorithm";
        let unit = Unit::Seconds;
        let mut m =
            e.encode_descriptor("heddle_collective", help, Some(&unit), MetricType::Histogram)?;
        for (labels, h) in &self.collectives {
            h.encode(&mut m.encode_family(labels)?)?;
        }
        let help = "Resident memory of each worker process";
        let memory = "heddle_worker_resident_memory";
        gauges(&mut e, memory, help, Some(Unit::Bytes), &self.resident)?;
        let help = "CPU time (user and system) of each worker process";
        counters(&mut e, "heddle_worker_cpu_seconds", help, &self.cpu)?;
        if let Some(h) = &self.checkpoints {
            let help = "Checkpoints' duration, trigger to the last acknowledgement";
            let unit = Unit::Seconds;
            let mut m = e.encode_descriptor(
                "heddle_checkpoint_duration",
                help,
                Some(&unit),
                MetricType::Histogram,
            )?;
            h.encode(&mut m)?;
        }
        Ok(())
    }
}

fn counters<V: EncodeCounterValue>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    values: &[(Labels, V)],
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in values {
        m.encode_family(labels)?.encode_counter::<NoLabelSet, _, u64>(v, None)?;
    }
    Ok(())
}

fn gauges<V: EncodeGaugeValue>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    values: &[(Labels, V)],
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
    for (labels, v) in values {
        m.encode_family(labels)?.encode_gauge(v)?;
    }
    Ok(())
}

/// The Prometheus text format 0.0.4 of OpenMetrics text `om`, for scrapers that do not
/// ask for OpenMetrics: a counter's family takes its samples' `_total` name, and the
/// `# UNIT` and `# EOF` lines go.
pub(crate) fn classic(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<&str> = None;
    for line in om.lines() {
        if line.starts_with("# HELP ") {
            help = Some(line);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = if kind == "counter" { format!("{name}_total") } else { name.into() };
            if let Some(h) = help.take() {
                let text = h.splitn(4, ' ').nth(3).unwrap_or_default();
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The OpenMetrics text of `GET /metrics` for `state`.
pub(crate) fn render(state: &State) -> String {
    let mut scrape =
        Scrape { attempt: state.attempt.into(), workers: state.size as u64, ..Scrape::default() };
    let tasks = state.tasks();
    for t in tasks["tasks"].as_array().into_iter().flatten() {
        let labels: Labels = vec![
            ("task", t["task"].as_str().unwrap_or_default().to_string()),
            ("index", t["index"].to_string()),
            ("worker", t["worker"].to_string()),
        ];
        let count = |key: &str| t[key].as_u64().unwrap_or(0);
        scrape.records_in.push((labels.clone(), count("records_in")));
        scrape.records_out.push((labels.clone(), count("records_out")));
        scrape.bytes_in.push((labels.clone(), count("bytes_in")));
        scrape.bytes_out.push((labels, count("bytes_out")));
    }
    for e in tasks["edges"].as_array().into_iter().flatten() {
        let labels = vec![("edge", e["edge"].as_str().unwrap_or_default().to_string())];
        scrape.backpressure.push((labels, e["backpressure_ratio"].as_f64().unwrap_or(0.0)));
    }
    for w in state.workers.values() {
        let Some((_, last)) = &w.last else { continue };
        for (transport, bytes) in &last.bytes_sent {
            *scrape.bytes_sent.entry(transport.clone()).or_default() += bytes;
        }
        let labels = vec![("rank", w.rank.to_string()), ("host", w.host.clone())];
        scrape.resident.push((labels.clone(), last.resident_bytes));
        scrape.cpu.push((labels, last.cpu_seconds));
        if let Some(c) = &last.checkpoints {
            if scrape.checkpoints.is_none() {
                scrape.checkpoints = Some(Histogram { buckets: c.buckets.clone(), sum: c.seconds });
            }
        }
    }
    for c in state.collective_totals() {
        let labels = vec![("operation", c.operation.clone()), ("algorithm", c.algorithm.clone())];
        scrape.collectives.push((labels, Histogram { buckets: c.buckets, sum: c.seconds }));
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_take_their_total_name_in_the_classic_format() {
        let om = "# HELP x Records in\n# TYPE x counter\nx_total{a=\"1\"} 5\n# HELP d Time\n\
                  # TYPE d histogram\n# UNIT d seconds\nd_count 1\n# EOF\n";
        assert_eq!(
            super::classic(om),
            "# HELP x_total Records in\n# TYPE x_total counter\nx_total{a=\"1\"} 5\n\
             # HELP d Time\n# TYPE d histogram\nd_count 1\n"
        );
    }
}
