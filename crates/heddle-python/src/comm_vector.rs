//! The bodies of `heddle._heddle.comm.Comm`'s vector collectives, whose blocks differ in
//! size (`[buffer, counts]`, or at displacements: `[buffer, (counts, displs)]`):
//! `Gatherv`, `Allgatherv`, `Scatterv`, `Alltoallv`.

use pyo3::prelude::*;

use crate::buffer::{Buffer, Region};
use crate::comm::PyComm;
use crate::comm_args::{check_pair, vspec};
use crate::comm_blocks::Blocks;
use crate::errors::{self, argument};
use crate::interrupt::blocking;

impl PyComm {
    /// `Comm.Gatherv` (documented on the Python method in `comm.rs`).
    pub(crate) fn gatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let (p, me) = (self.comm().size(), self.comm().rank());
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let (recv, counts, blocks) = match (me == root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(spec)) => {
                let (b, counts, displs) = vspec(spec, "recvbuf")?;
                let r = Buffer::get(&b, true, "recvbuf")?;
                check_pair("Gatherv", &send, "sendbuf", &r, "recvbuf")?;
                let counts = self.counts_arg(&counts, "Gatherv", r.itemsize)?;
                let blocks = Blocks::new("Gatherv", &counts, displs, r.itemsize, r.bytes())?;
                (Some(r), counts, blocks)
            }
            (true, None) => {
                return Err(argument("Gatherv: the root must pass recvbuf = [buffer, counts]"))
            }
            (false, _) => {
                // Only the root reads counts; ours must match our buffer.
                let mut counts = vec![0; p];
                counts[me] = send.bytes();
                (None, counts, None)
            }
        };
        let send_region = send.region();
        let recv_region = recv.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let (_packed, into) = match &blocks {
            Some(b) => b.scratch(),
            None => (Vec::new(), recv_region),
        };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.gatherv(unsafe { send_region.bytes() }, unsafe { into.bytes_mut() }, &counts, root)
        })
        .map_err(errors::comm)?;
        if let Some(b) = &blocks {
            // SAFETY: recvbuf is exported and writable; `into` is the blocks' scratch.
            unsafe { b.unpack(into, recv_region) };
        }
        Ok(())
    }

    /// `Comm.Allgatherv` (documented on the Python method in `comm.rs`).
    pub(crate) fn allgatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let (b, counts, displs) = vspec(recvbuf, "recvbuf")?;
        let recv = Buffer::get(&b, true, "recvbuf")?;
        check_pair("Allgatherv", &send, "sendbuf", &recv, "recvbuf")?;
        let counts = self.counts_arg(&counts, "Allgatherv", recv.itemsize)?;
        let blocks = Blocks::new("Allgatherv", &counts, displs, recv.itemsize, recv.bytes())?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let (_packed, into) = match &blocks {
            Some(b) => b.scratch(),
            None => (Vec::new(), recv_region),
        };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.allgatherv(unsafe { send_region.bytes() }, unsafe { into.bytes_mut() }, &counts)
        })
        .map_err(errors::comm)?;
        if let Some(b) = &blocks {
            // SAFETY: recvbuf is exported and writable; `into` is the blocks' scratch.
            unsafe { b.unpack(into, recv_region) };
        }
        Ok(())
    }

    /// `Comm.Scatterv` (documented on the Python method in `comm.rs`).
    pub(crate) fn scatterv(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let (p, me) = (self.comm().size(), self.comm().rank());
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let (send, counts, blocks) = match (me == root, sendbuf.filter(|s| !s.is_none())) {
            (true, Some(spec)) => {
                let (b, counts, displs) = vspec(spec, "sendbuf")?;
                let s = Buffer::get(&b, false, "sendbuf")?;
                check_pair("Scatterv", &s, "sendbuf", &recv, "recvbuf")?;
                let counts = self.counts_arg(&counts, "Scatterv", s.itemsize)?;
                let blocks = Blocks::new("Scatterv", &counts, displs, s.itemsize, s.bytes())?;
                (Some(s), counts, blocks)
            }
            (true, None) => {
                return Err(argument("Scatterv: the root must pass sendbuf = [buffer, counts]"))
            }
            (false, _) => {
                let mut counts = vec![0; p];
                counts[me] = recv.bytes();
                (None, counts, None)
            }
        };
        let send_region = send.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        let recv_region = recv.region();
        // SAFETY: sendbuf is exported and holds every block.
        let (_packed, send_region) = match &blocks {
            Some(b) => unsafe { b.pack(send_region) },
            None => (Vec::new(), send_region),
        };
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.scatterv(
                unsafe { send_region.bytes() },
                &counts,
                unsafe { recv_region.bytes_mut() },
                root,
            )
        })
        .map_err(errors::comm)
    }

    /// `Comm.Alltoallv` (documented on the Python method in `comm.rs`).
    pub(crate) fn alltoallv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (sb, send_counts, send_displs) = vspec(sendbuf, "sendbuf")?;
        let (rb, recv_counts, recv_displs) = vspec(recvbuf, "recvbuf")?;
        let send = Buffer::get(&sb, false, "sendbuf")?;
        let recv = Buffer::get(&rb, true, "recvbuf")?;
        check_pair("Alltoallv", &send, "sendbuf", &recv, "recvbuf")?;
        let send_counts = self.counts_arg(&send_counts, "Alltoallv", send.itemsize)?;
        let recv_counts = self.counts_arg(&recv_counts, "Alltoallv", recv.itemsize)?;
        let (what, send_len, recv_len) = ("Alltoallv", send.bytes(), recv.bytes());
        let send_blocks = Blocks::new(what, &send_counts, send_displs, send.itemsize, send_len)?;
        let recv_blocks = Blocks::new(what, &recv_counts, recv_displs, recv.itemsize, recv_len)?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported and holds every block.
        let (_packed_send, send_region) = match &send_blocks {
            Some(b) => unsafe { b.pack(send_region) },
            None => (Vec::new(), send_region),
        };
        let (_packed_recv, into) = match &recv_blocks {
            Some(b) => b.scratch(),
            None => (Vec::new(), recv_region),
        };
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(into) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.alltoallv(
                unsafe { send_region.bytes() },
                &send_counts,
                unsafe { into.bytes_mut() },
                &recv_counts,
            )
        })
        .map_err(errors::comm)?;
        if let Some(b) = &recv_blocks {
            // SAFETY: recvbuf is exported and writable; `into` is the blocks' scratch.
            unsafe { b.unpack(into, recv_region) };
        }
        Ok(())
    }
}
