//! Which ranks of a communicator share a host: the groups host-aware (hierarchical)
//! collectives work in — shared memory inside a group, one leader per host across hosts.

/// A communicator's ranks grouped by host.
#[derive(Debug)]
pub(crate) struct Layout {
    /// World ranks per host; hosts in the order of their first communicator rank, ranks in
    /// communicator order.
    pub(crate) groups: Vec<Vec<usize>>,
    /// The same groups as communicator ranks.
    pub(crate) ranks: Vec<Vec<usize>>,
    /// The first world rank of each group: the hosts' leaders.
    pub(crate) leaders: Vec<usize>,
    /// Per communicator rank: its group and its index in that group.
    pub(crate) place: Vec<(usize, usize)>,
    /// World ranks by index in their group: `columns[i]` holds the i-th rank of every
    /// host that has one, in host order.
    pub(crate) columns: Vec<Vec<usize>>,
}

impl Layout {
    /// The layout of `members` (world ranks, in communicator order), where world rank `w`
    /// runs on host `hosts[w]`.
    pub(crate) fn new(members: &[usize], hosts: &[u32]) -> Layout {
        let mut ids: Vec<u32> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut ranks: Vec<Vec<usize>> = Vec::new();
        let mut place = Vec::with_capacity(members.len());
        for (r, &w) in members.iter().enumerate() {
            let host = hosts.get(w).copied().unwrap_or(0);
            let g = match ids.iter().position(|&h| h == host) {
                Some(g) => g,
                None => {
                    ids.push(host);
                    groups.push(Vec::new());
                    ranks.push(Vec::new());
                    groups.len() - 1
                }
            };
            place.push((g, groups[g].len()));
            groups[g].push(w);
            ranks[g].push(r);
        }
        let leaders = groups.iter().map(|g| g[0]).collect();
        let widest = groups.iter().map(Vec::len).max().unwrap_or(0);
        let columns = (0..widest)
            .map(|i| groups.iter().filter_map(|g| g.get(i).copied()).collect())
            .collect();
        Layout { groups, ranks, leaders, place, columns }
    }

    /// Whether host-aware algorithms differ from flat ones: several hosts, and some host
    /// with more than one rank.
    pub(crate) fn spans_hosts(&self) -> bool {
        self.groups.len() > 1 && self.groups.len() < self.place.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_hosts_in_communicator_order() {
        // World ranks 0..6 on hosts a b a b c c; the communicator holds them reversed.
        let hosts = [0, 1, 0, 1, 2, 2];
        let l = Layout::new(&[5, 4, 3, 2, 1, 0], &hosts);
        assert_eq!(l.groups, vec![vec![5, 4], vec![3, 1], vec![2, 0]]);
        assert_eq!(l.ranks, vec![vec![0, 1], vec![2, 4], vec![3, 5]]);
        assert_eq!(l.leaders, vec![5, 3, 2]);
        assert_eq!(l.place[3], (2, 0)); // communicator rank 3 is world rank 2
        assert_eq!(l.columns, vec![vec![5, 3, 2], vec![4, 1, 0]]);
        assert!(l.spans_hosts());
        assert!(!Layout::new(&[0, 1, 2], &[0, 0, 0]).spans_hosts());
        assert!(!Layout::new(&[0, 1, 2], &[0, 1, 2]).spans_hosts());
    }
}
