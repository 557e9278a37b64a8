//! Names of collectives and algorithms, and the choice of algorithm: forced per call,
//! forced by configuration, or looked up in `tuning.json`; an algorithm that cannot apply
//! falls back to one that always works.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::{Error, Result};

macro_rules! named_enum {
    (
        $(#[$m:meta])* $name:ident, $what:literal {
            $($(#[$vm:meta])* $v:ident = $s:literal),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($(#[$vm])* $v),* }
        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// The snake_case name used in config and `tuning.json`.
            pub fn name(self) -> &'static str { match self { $($name::$v => $s),* } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                $name::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                    let hint = crate::config::closest(s, &names);
                    Error::Config(match hint {
                        Some(h) => format!("unknown {} {s:?}; did you mean {h:?}?", $what),
                        None => {
                            let all = names.join(", ");
                            format!("unknown {} {s:?}; expected one of {all}", $what)
                        }
                    })
                })
            }
        }
    };
}

named_enum!(
    /// A collective operation.
    Collective, "collective" {
        /// barrier
        Barrier = "barrier",
        /// broadcast
        Broadcast = "broadcast",
        /// reduce to a root
        Reduce = "reduce",
        /// allreduce
        Allreduce = "allreduce",
        /// gather(v)
        Gather = "gather",
        /// scatter(v)
        Scatter = "scatter",
        /// allgather(v)
        Allgather = "allgather",
        /// alltoall(v)
        Alltoall = "alltoall",
        /// reduce_scatter
        ReduceScatter = "reduce_scatter",
        /// inclusive prefix reduction
        Scan = "scan",
        /// exclusive prefix reduction
        Exscan = "exscan",
    }
);

named_enum!(
    /// A collective algorithm. Which collectives each serves is in [`Algorithm::serves`].
    Algorithm, "algorithm" {
        /// Dissemination barrier: ⌈log₂p⌉ rounds of empty messages.
        Dissemination = "dissemination",
        /// Binomial tree (broadcast, reduce).
        BinomialTree = "binomial_tree",
        /// Scatter then ring allgather (van de Geijn broadcast).
        ScatterAllgather = "scatter_allgather",
        /// Recursive doubling (allreduce, scan, exscan; allgather on powers of two).
        RecursiveDoubling = "recursive_doubling",
        /// Ring: reduce-scatter then allgather (allreduce), or p−1 neighbour steps.
        Ring = "ring",
        /// Rabenseifner: recursive-halving reduce-scatter, recursive-doubling allgather.
        Rabenseifner = "rabenseifner",
        /// Reduce to rank 0 then broadcast: works for everything.
        ReduceBroadcast = "reduce_broadcast",
        /// Bruck allgather: ⌈log₂p⌉ steps, any p.
        Bruck = "bruck",
        /// Pairwise exchange alltoall: p−1 steps.
        Pairwise = "pairwise",
        /// Root talks to every rank directly (gather, scatter), or all pairs at once (alltoall).
        Linear = "linear",
        /// Host-aware: inside each host over shared memory, one leader per host across
        /// (broadcast, reduce, allreduce, allgather on communicators that span hosts).
        Hierarchical = "hierarchical",
        /// Host-aware for large vectors (allreduce): reduce-scatter inside each host, the
        /// i-th ranks of all hosts allreduce block i, allgather inside each host, so that
        /// every rank carries 1/l of the vector across the network (l ranks a host).
        TwoLevel = "two_level",
        /// Broadcast inside one host through the root's shared-memory area: the root
        /// copies each chunk in once and every rank copies it out (Squirrel's channel),
        /// instead of each hop of a tree copying it through a ring.
        ShmChannel = "shm_channel",
    }
);

impl Algorithm {
    /// Whether this algorithm implements `c`.
    pub fn serves(self, c: Collective) -> bool {
        use Algorithm as A;
        use Collective as C;
        matches!(
            (c, self),
            (C::Barrier, A::Dissemination)
                | (
                    C::Broadcast,
                    A::BinomialTree | A::ScatterAllgather | A::Hierarchical | A::ShmChannel
                )
                | (C::Reduce, A::BinomialTree | A::Hierarchical)
                | (
                    C::Allreduce,
                    A::RecursiveDoubling
                        | A::Ring
                        | A::Rabenseifner
                        | A::ReduceBroadcast
                        | A::Hierarchical
                        | A::TwoLevel
                )
                | (C::Gather, A::Linear)
                | (C::Scatter, A::Linear)
                | (C::Allgather, A::Ring | A::RecursiveDoubling | A::Bruck | A::Hierarchical)
                | (C::Alltoall, A::Pairwise | A::Linear)
                | (C::ReduceScatter, A::Ring | A::ReduceBroadcast)
                | (C::Scan | C::Exscan, A::RecursiveDoubling)
        )
    }

    /// Whether it can run with `ranks` ranks and equal (`uniform`) per-rank sizes, on a
    /// communicator that spans hosts or not, whose members map each other's broadcast
    /// areas (`areas`) or not.
    fn applies(self, c: Collective, ranks: usize, uniform: bool, at: Reach) -> bool {
        match (c, self) {
            (_, Algorithm::Hierarchical | Algorithm::TwoLevel) => at.spans_hosts && self.serves(c),
            (_, Algorithm::ShmChannel) => at.areas && self.serves(c),
            (Collective::Allgather, Algorithm::RecursiveDoubling) => {
                ranks.is_power_of_two() && uniform
            }
            (Collective::Allgather, Algorithm::Bruck) => uniform,
            _ => self.serves(c),
        }
    }
}

/// The algorithm that always applies, used when a forced one cannot.
fn fallback(c: Collective) -> Algorithm {
    match c {
        Collective::Barrier => Algorithm::Dissemination,
        Collective::Broadcast | Collective::Reduce => Algorithm::BinomialTree,
        Collective::Allreduce => Algorithm::ReduceBroadcast,
        Collective::Gather | Collective::Scatter => Algorithm::Linear,
        Collective::Allgather => Algorithm::Ring,
        Collective::Alltoall => Algorithm::Pairwise,
        Collective::ReduceScatter => Algorithm::ReduceBroadcast,
        Collective::Scan | Collective::Exscan => Algorithm::RecursiveDoubling,
    }
}

#[derive(Debug, Deserialize)]
struct Rule {
    max_ranks: Option<usize>,
    max_bytes: Option<usize>,
    /// Matches only communicators that span hosts (`true`) or live on one (`false`).
    multi_host: Option<bool>,
    algorithm: String,
}

/// Each collective's rules, in order, with their parsed algorithms.
type Table = Vec<(Collective, Vec<(Rule, Algorithm)>)>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let raw: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_str(include_str!("tuning.json")).expect("tuning.json is valid JSON");
        raw.into_iter()
            .filter(|(k, _)| !k.starts_with('_'))
            .map(|(k, v)| {
                let c: Collective = k.parse().expect("tuning.json names a known collective");
                let rules: Vec<Rule> =
                    serde_json::from_value(v).expect("tuning.json rules are well-formed");
                let rules = rules
                    .into_iter()
                    .map(|r| {
                        let a: Algorithm =
                            r.algorithm.parse().expect("tuning.json names a known algorithm");
                        assert!(a.serves(c), "tuning.json: {a} does not implement {c}");
                        (r, a)
                    })
                    .collect();
                (c, rules)
            })
            .collect()
    })
}

/// Where a communicator's members run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reach {
    /// On more than one host.
    pub(crate) spans_hosts: bool,
    /// On one host, each mapping the others' broadcast areas (shared memory).
    pub(crate) areas: bool,
}

/// [`choose_at`] for a communicator whose members do not share broadcast areas.
pub(crate) fn choose(
    c: Collective,
    forced: Option<Algorithm>,
    ranks: usize,
    bytes: usize,
    uniform: bool,
    spans_hosts: bool,
) -> Algorithm {
    choose_at(c, forced, ranks, bytes, uniform, Reach { spans_hosts, areas: false })
}

/// Picks the algorithm for one call: `forced` (per call, else by config) if it applies,
/// else the first matching rule of the table, else the fallback.
pub(crate) fn choose_at(
    c: Collective,
    forced: Option<Algorithm>,
    ranks: usize,
    bytes: usize,
    uniform: bool,
    at: Reach,
) -> Algorithm {
    let spans_hosts = at.spans_hosts;
    if let Some(a) = forced {
        if a.applies(c, ranks, uniform, at) {
            return a;
        }
        tracing::debug!("{a} cannot run {c} on {ranks} ranks here ({at:?}); using {}", fallback(c));
        return fallback(c);
    }
    table()
        .iter()
        .find(|(tc, _)| *tc == c)
        .and_then(|(_, rules)| {
            rules.iter().find(|(r, a)| {
                r.max_ranks.is_none_or(|m| ranks <= m)
                    && r.max_bytes.is_none_or(|m| bytes <= m)
                    && r.multi_host.is_none_or(|m| m == spans_hosts)
                    && a.applies(c, ranks, uniform, at)
            })
        })
        .map_or_else(|| fallback(c), |(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_picks_host_aware_algorithms_across_hosts_only() {
        // Measured on three simulated hosts (benches/hosts/bench_hosts.py): host-aware wins
        // allreduce and allgather up to 64 KiB and broadcast from 64 KiB.
        let hier = |c, bytes| choose(c, None, 6, bytes, true, true) == Algorithm::Hierarchical;
        assert!(hier(Collective::Allreduce, 8) && !hier(Collective::Allreduce, 1 << 20));
        assert!(!hier(Collective::Broadcast, 8) && hier(Collective::Broadcast, 1 << 20));
        assert!(hier(Collective::Reduce, 8) && hier(Collective::Reduce, 1 << 24));
        assert!(hier(Collective::Allgather, 8) && !hier(Collective::Allgather, 1 << 20));
        for c in [Collective::Allreduce, Collective::Broadcast, Collective::Reduce] {
            assert_ne!(choose(c, None, 6, 8, true, false), Algorithm::Hierarchical, "{c}");
            // Forced on one host, it falls back.
            let forced = choose(c, Some(Algorithm::Hierarchical), 6, 8, true, false);
            assert_ne!(forced, Algorithm::Hierarchical, "{c}");
        }
    }

    #[test]
    fn table_loads_and_every_collective_has_a_choice() {
        for &c in Collective::ALL {
            for ranks in 1..=8 {
                for bytes in [0, 8, 1 << 20, 1 << 26] {
                    assert!(choose(c, None, ranks, bytes, true, false).serves(c));
                }
            }
        }
    }

    #[test]
    fn forced_algorithm_falls_back_when_it_cannot_apply() {
        assert_eq!(
            choose(Collective::Allgather, Some(Algorithm::RecursiveDoubling), 3, 8, true, false),
            Algorithm::Ring
        );
        assert_eq!(
            choose(Collective::Allgather, Some(Algorithm::RecursiveDoubling), 4, 8, true, false),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(
            choose(Collective::Allreduce, Some(Algorithm::Bruck), 4, 8, true, false),
            Algorithm::ReduceBroadcast
        );
    }

    #[test]
    fn misspelled_names_get_a_suggestion() {
        let e = "rabenseifer".parse::<Algorithm>().unwrap_err().to_string();
        assert!(e.contains("did you mean \"rabenseifner\""), "{e}");
    }
}
