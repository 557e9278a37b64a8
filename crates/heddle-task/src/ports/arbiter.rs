//! `Activation`: the handle an activated arbiter hands back, to ask whether it is still
//! listening and to cancel it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::port::{ListenerId, PortCore};

/// What every activated arbiter can answer and do.
pub(crate) trait Arbiter: Send + Sync {
    /// Detaches from every port; returns whether it was still active.
    fn cancel(&self) -> bool;
    /// Whether it may still run a handler for a future post.
    fn is_active(&self) -> bool;
}

/// The handle of an activated arbiter.
///
/// Dropping it does not cancel anything: a persistent receiver keeps listening for as
/// long as its port exists. A receiver whose handler holds a clone of its own port keeps
/// that port alive until it is cancelled (or, for a one-shot receiver, until it fires).
#[derive(Clone)]
pub struct Activation {
    arbiter: Arc<dyn Arbiter>,
}

impl Activation {
    pub(crate) fn new(arbiter: Arc<dyn Arbiter>) -> Self {
        Activation { arbiter }
    }

    /// Stops the arbiter: detaches it from its ports so later posts stay in them.
    /// Handlers already queued or running still complete. Returns whether it was still
    /// active (false if a one-shot arbiter had already fired or it was cancelled before).
    pub fn cancel(&self) -> bool {
        self.arbiter.cancel()
    }

    /// Whether the arbiter may still run a handler for a future post: false once a
    /// one-shot arbiter fired, an interleave was torn down, it was cancelled, or its
    /// ports are gone.
    pub fn is_active(&self) -> bool {
        self.arbiter.is_active()
    }
}

impl fmt::Debug for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Activation").field("active", &self.is_active()).finish()
    }
}

/// The activation of an arbiter attached to a single port (receive, multiple-item
/// receive): `active` is shared with the listener, which clears it when a one-shot
/// receiver fires.
pub(crate) struct SinglePortActivation<T> {
    pub(crate) port: Weak<PortCore<T>>,
    pub(crate) id: ListenerId,
    pub(crate) active: Arc<AtomicBool>,
}

impl<T: Send + 'static> Arbiter for SinglePortActivation<T> {
    fn cancel(&self) -> bool {
        let detached = self.port.upgrade().is_some_and(|port| port.detach(self.id));
        self.active.store(false, Ordering::Release);
        detached
    }

    fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire) && self.port.strong_count() > 0
    }
}
