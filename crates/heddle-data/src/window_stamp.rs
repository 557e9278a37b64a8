//! Before a window's shuffle: records stamped with their time, and watermarks sent to
//! every window instance in order with them.

use std::hash::Hash;
use std::sync::Arc;

use heddle_task::{Compute, Context, Result};
use serde::{Deserialize, Serialize};

use crate::window::now_ms;

/// What crosses the shuffle in front of a window: records, and watermarks addressed to
/// one window instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Element<K, V> {
    Record(K, V, u64),
    Mark { time: u64, from: u32, to: u32 },
}

/// Before the shuffle: stamps records, and sends watermarks to every window instance.
pub(crate) struct Stamp<K, V> {
    pub(crate) time: Arc<dyn Fn(&V) -> u64 + Send + Sync>,
    pub(crate) event: Option<u64>,
    pub(crate) targets: u32,
    pub(crate) max_seen: u64,
    pub(crate) last_mark: u64,
    pub(crate) _kv: std::marker::PhantomData<fn(K)>,
}

impl<K: Send + 'static, V: Send + 'static> Stamp<K, V> {
    fn marks(&self, ctx: &mut Context<'_, Element<K, V>>, time: u64) {
        for to in 0..self.targets {
            ctx.emit(Element::Mark { time, from: ctx.index(), to });
        }
    }
}

impl<K: Send + 'static, V: Send + 'static> Compute for Stamp<K, V> {
    type In = (K, V);
    type Out = Element<K, V>;

    fn snapshot(&mut self, _: &mut Context<'_, Self::Out>, _: u64) -> Result<Option<Vec<u8>>> {
        Ok(Some([self.max_seen, self.last_mark].iter().flat_map(|x| x.to_le_bytes()).collect()))
    }

    fn restore(&mut self, ctx: &mut Context<'_, Self::Out>, state: &[u8]) -> Result<()> {
        let word = |i: usize| state.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok());
        let (Some(max_seen), Some(last_mark)) = (word(0), word(1)) else {
            return Err(heddle_task::Error::Graph(format!(
                "{}: its checkpointed watermark does not decode",
                ctx.info()
            )));
        };
        (self.max_seen, self.last_mark) =
            (u64::from_le_bytes(max_seen), u64::from_le_bytes(last_mark));
        Ok(())
    }

    fn execute(&mut self, ctx: &mut Context<'_, Element<K, V>>, (k, v): (K, V)) -> Result<()> {
        let t = match self.event {
            Some(_) => (self.time)(&v),
            None => now_ms(),
        };
        self.max_seen = self.max_seen.max(t);
        ctx.emit(Element::Record(k, v, t));
        // Event time: a watermark follows the record whenever it advances (at most one
        // per millisecond of event time), in order with the records behind it.
        if let Some(ooo) = self.event {
            let mark = self.max_seen.saturating_sub(ooo);
            if mark > self.last_mark {
                self.last_mark = mark;
                self.marks(ctx, mark);
            }
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, Element<K, V>>) -> Result<()> {
        // The input ended: every window may fire.
        self.marks(ctx, u64::MAX);
        Ok(())
    }
}

/// The partition of a shuffled element: records by key, watermarks to their address.
pub(crate) fn element_partition<K: Hash, V>(e: &Element<K, V>, p: usize) -> usize {
    match e {
        Element::Record(k, _, _) => crate::keyed::key_partition(k, p),
        Element::Mark { to, .. } => *to as usize,
    }
}
