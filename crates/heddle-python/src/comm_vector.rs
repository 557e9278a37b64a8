//! The bodies of `heddle._heddle.comm.Comm`'s vector collectives, whose blocks differ in
//! size (`[buffer, counts]`): `Gatherv`, `Allgatherv`, `Scatterv`, `Alltoallv`.

use pyo3::prelude::*;

use crate::buffer::{Buffer, Region};
use crate::comm::PyComm;
use crate::comm_args::{check_pair, vspec};
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
        let (recv, counts) = match (me == root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(spec)) => {
                let (b, counts) = vspec(spec, "recvbuf")?;
                let r = Buffer::get(&b, true, "recvbuf")?;
                check_pair("Gatherv", &send, "sendbuf", &r, "recvbuf")?;
                let counts = self.counts_arg(&counts, "Gatherv", r.itemsize)?;
                (Some(r), counts)
            }
            (true, None) => {
                return Err(argument("Gatherv: the root must pass recvbuf = [buffer, counts]"))
            }
            (false, _) => {
                // Only the root reads counts; ours must match our buffer.
                let mut counts = vec![0; p];
                counts[me] = send.bytes();
                (None, counts)
            }
        };
        let send_region = send.region();
        let recv_region = recv.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.gatherv(
                unsafe { send_region.bytes() },
                unsafe { recv_region.bytes_mut() },
                &counts,
                root,
            )
        })
        .map_err(errors::comm)
    }

    /// `Comm.Allgatherv` (documented on the Python method in `comm.rs`).
    pub(crate) fn allgatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let (b, counts) = vspec(recvbuf, "recvbuf")?;
        let recv = Buffer::get(&b, true, "recvbuf")?;
        check_pair("Allgatherv", &send, "sendbuf", &recv, "recvbuf")?;
        let counts = self.counts_arg(&counts, "Allgatherv", recv.itemsize)?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.allgatherv(
                unsafe { send_region.bytes() },
                unsafe { recv_region.bytes_mut() },
                &counts,
            )
        })
        .map_err(errors::comm)
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
        let (send, counts) = match (me == root, sendbuf.filter(|s| !s.is_none())) {
            (true, Some(spec)) => {
                let (b, counts) = vspec(spec, "sendbuf")?;
                let s = Buffer::get(&b, false, "sendbuf")?;
                check_pair("Scatterv", &s, "sendbuf", &recv, "recvbuf")?;
                let counts = self.counts_arg(&counts, "Scatterv", s.itemsize)?;
                (Some(s), counts)
            }
            (true, None) => {
                return Err(argument("Scatterv: the root must pass sendbuf = [buffer, counts]"))
            }
            (false, _) => {
                let mut counts = vec![0; p];
                counts[me] = recv.bytes();
                (None, counts)
            }
        };
        let send_region = send.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        let recv_region = recv.region();
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
        let (sb, send_counts) = vspec(sendbuf, "sendbuf")?;
        let (rb, recv_counts) = vspec(recvbuf, "recvbuf")?;
        let send = Buffer::get(&sb, false, "sendbuf")?;
        let recv = Buffer::get(&rb, true, "recvbuf")?;
        check_pair("Alltoallv", &send, "sendbuf", &recv, "recvbuf")?;
        let send_counts = self.counts_arg(&send_counts, "Alltoallv", send.itemsize)?;
        let recv_counts = self.counts_arg(&recv_counts, "Alltoallv", recv.itemsize)?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.alltoallv(
                unsafe { send_region.bytes() },
                &send_counts,
                unsafe { recv_region.bytes_mut() },
                &recv_counts,
            )
        })
        .map_err(errors::comm)
    }
}
