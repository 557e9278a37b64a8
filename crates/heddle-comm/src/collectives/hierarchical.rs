//! Host-aware collectives for communicators that span hosts: ranks of one host combine or
//! share their data over shared memory first, one leader per host (its first rank) talks
//! across the network, then each leader passes the result on inside its host. The leaders'
//! step uses the algorithm the table picks for their number and the message size.
//!
//! Cost (allreduce, h hosts of l ranks): 2⌈log₂l⌉ shared-memory steps plus one allreduce
//! of h ranks across the network, instead of one of h·l ranks.

use super::Algorithm;
use super::{allgather, allreduce, broadcast, choose, displacements, reduce, reduce_scatter};
use super::{Collective, Step};
use crate::engine::Sink;
use crate::Result;

/// Runs `f` on `s` narrowed to `members` (world ranks), as their rank `rank`.
fn within<'c, R>(
    s: &mut Step<'c>,
    members: &'c [usize],
    rank: usize,
    f: impl FnOnce(&mut Step<'c>) -> Result<R>,
) -> Result<R> {
    let saved = (s.members, s.rank);
    (s.members, s.rank) = (members, rank);
    let out = f(s);
    (s.members, s.rank) = saved;
    out
}

/// The flat algorithm for the leaders' step.
fn for_leaders(c: Collective, leaders: usize, bytes: usize) -> Algorithm {
    choose(c, None, leaders, bytes, true, false)
}

/// Allgather(v) (`counts[r]`: rank r's bytes): each host's leader collects its ranks'
/// blocks, the leaders allgather the hosts' blocks, and each leader puts them in rank
/// order and broadcasts the whole inside its host.
pub(crate) fn allgather(
    s: &mut Step<'_>,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
) -> Result<()> {
    let layout = s.layout;
    let (g, i) = layout.place[s.rank];
    let local = &layout.groups[g][..];
    if i > 0 {
        within(s, local, i, |s| s.send(0, send))?;
    } else {
        let hosts: Vec<usize> =
            layout.ranks.iter().map(|grp| grp.iter().map(|&r| counts[r]).sum()).collect();
        let mut mine = vec![0u8; hosts[g]];
        let mut off = 0;
        for (j, &r) in layout.ranks[g].iter().enumerate() {
            let block = &mut mine[off..off + counts[r]];
            if j == 0 {
                block.copy_from_slice(send);
            } else {
                within(s, local, 0, |s| s.recv(j, Sink::Copy(block)))?;
            }
            off += counts[r];
        }
        let mut all = vec![0u8; hosts.iter().sum()];
        let uniform = hosts.iter().all(|&b| b == hosts[0]);
        let alg = choose(Collective::Allgather, None, hosts.len(), hosts[g], uniform, false);
        within(s, &layout.leaders, g, |s| allgather::run(s, alg, &mine, &mut all, &hosts))?;
        let d = displacements(counts);
        let mut off = 0;
        for &r in layout.ranks.iter().flatten() {
            recv[d[r].0..d[r].0 + d[r].1].copy_from_slice(&all[off..off + counts[r]]);
            off += counts[r];
        }
    }
    if local.len() > 1 {
        within(s, local, i, |s| in_host(s, recv, 0))?;
    }
    Ok(())
}

/// Allreduce: reduce to each host's leader, allreduce among leaders, broadcast back.
pub(crate) fn allreduce(
    s: &mut Step<'_>,
    buf: &mut [u8],
    elem: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let layout = s.layout;
    let (g, i) = layout.place[s.rank];
    let local = &layout.groups[g][..];
    if local.len() > 1 {
        let send = buf.to_vec();
        within(s, local, i, |s| reduce::binomial_tree::run(s, &send, buf, 0, f))?;
    }
    if i == 0 {
        let alg = for_leaders(Collective::Allreduce, layout.leaders.len(), buf.len());
        within(s, &layout.leaders, g, |s| allreduce::run(s, alg, buf, elem, f))?;
    }
    if local.len() > 1 {
        within(s, local, i, |s| in_host(s, buf, 0))?;
    }
    Ok(())
}

/// Allreduce in two levels, for large vectors: the vector is cut into l blocks (l ranks on
/// every host); a ring reduce-scatter inside each host leaves the host's sum of block i on
/// its i-th rank, the i-th ranks of all hosts allreduce that block across the network (the
/// table's algorithm for that many hosts and bytes), and a ring allgather inside each host
/// gives every rank the whole. Each rank sends 2(h−1)/h of 1/l of the vector across the
/// network, all of a host's ranks at once, where the leaders of [`allreduce`] carry the
/// whole vector. Hosts with different numbers of ranks use [`allreduce`].
pub(crate) fn allreduce_two_level(
    s: &mut Step<'_>,
    buf: &mut [u8],
    elem: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let layout = s.layout;
    let l = layout.groups[0].len();
    if layout.groups.iter().any(|g| g.len() != l) || buf.len() < l * elem {
        return allreduce(s, buf, elem, f);
    }
    let (g, i) = layout.place[s.rank];
    let local = &layout.groups[g][..];
    let n = buf.len() / elem;
    let counts: Vec<usize> = (0..l).map(|j| (n / l + usize::from(j < n % l)) * elem).collect();
    let mut block = vec![0u8; counts[i]];
    within(s, local, i, |s| reduce_scatter::run(s, Algorithm::Ring, buf, &mut block, &counts, f))?;
    let column = &layout.columns[i][..];
    let alg = for_leaders(Collective::Allreduce, column.len(), block.len());
    within(s, column, g, |s| allreduce::run(s, alg, &mut block, elem, f))?;
    within(s, local, i, |s| allgather::run(s, Algorithm::Ring, &block, buf, &counts))
}

/// Broadcast from `root`: inside the root's host first, then among leaders, then inside
/// every other host.
pub(crate) fn broadcast(s: &mut Step<'_>, buf: &mut [u8], root: usize, elem: usize) -> Result<()> {
    let layout = s.layout;
    let ((g, i), (rg, ri)) = (layout.place[s.rank], layout.place[root]);
    let local = &layout.groups[g][..];
    if g == rg && local.len() > 1 {
        within(s, local, i, |s| in_host(s, buf, ri))?;
    }
    if i == 0 {
        let alg = for_leaders(Collective::Broadcast, layout.leaders.len(), buf.len());
        within(s, &layout.leaders, g, |s| broadcast::run(s, alg, buf, rg, elem))?;
    }
    if g != rg && local.len() > 1 {
        within(s, local, i, |s| in_host(s, buf, 0))?;
    }
    Ok(())
}

/// A broadcast inside one host: through the root's shared-memory area when every rank
/// maps it and the buffer is large, else down a binomial tree.
fn in_host(s: &mut Step<'_>, buf: &mut [u8], root: usize) -> Result<()> {
    let alg = super::choose_at(
        Collective::Broadcast,
        None,
        s.size(),
        buf.len(),
        true,
        super::Reach { spans_hosts: false, areas: s.areas.cover(s.members) },
    );
    match alg {
        Algorithm::ShmChannel => broadcast::shm_channel::run(s, buf, root),
        _ => broadcast::binomial_tree::run(s, buf, root),
    }
}

/// Reduce to `root`: inside each host to its leader, among leaders to the root's host's
/// leader, and from there to the root if it is not that leader.
pub(crate) fn reduce(
    s: &mut Step<'_>,
    send: &[u8],
    recv: &mut [u8],
    root: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let layout = s.layout;
    let ((g, i), (rg, ri)) = (layout.place[s.rank], layout.place[root]);
    let local = &layout.groups[g][..];
    let mut part = if i == 0 { vec![0u8; send.len()] } else { Vec::new() };
    if local.len() > 1 {
        within(s, local, i, |s| reduce::binomial_tree::run(s, send, &mut part, 0, f))?;
    } else {
        part.copy_from_slice(send);
    }
    if i == 0 {
        let mut total = if g == rg { vec![0u8; send.len()] } else { Vec::new() };
        within(s, &layout.leaders, g, |s| reduce::binomial_tree::run(s, &part, &mut total, rg, f))?;
        if g == rg {
            if ri == 0 {
                recv.copy_from_slice(&total);
            } else {
                within(s, local, i, |s| s.send(ri, &total))?;
            }
        }
    } else if g == rg && i == ri {
        within(s, local, i, |s| s.recv(0, Sink::Copy(recv)))?;
    }
    Ok(())
}
