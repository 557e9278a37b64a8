//! The bodies of `heddle._heddle.comm.Comm`'s point-to-point methods: `Send`, `Recv`,
//! `Sendrecv`, and the whole-message receive under the object methods.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::Buffer;
use crate::comm::PyComm;
use crate::comm_args::tag_arg;
use crate::errors::{self, argument};
use crate::interrupt::blocking;

impl PyComm {
    /// `Comm.Send` (documented on the Python method in `comm.rs`).
    pub(crate) fn send(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<()> {
        let dest = self.rank_arg(dest, "dest")?;
        let tag = tag_arg(tag)?;
        let b = Buffer::get(buf, false, "buf")?;
        let (region, dtype) = (b.region(), b.dtype.wire());
        let comm = self.comm();
        // SAFETY: buf stays exported until after the call.
        blocking(py, || comm.send_as(unsafe { region.bytes() }, dtype, dest, tag))
            .map_err(errors::comm)
    }

    /// `Comm.Recv` (documented on the Python method in `comm.rs`).
    pub(crate) fn recv(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i64,
        tag: i64,
    ) -> PyResult<usize> {
        let source = self.rank_arg(source, "source")?;
        let tag = tag_arg(tag)?;
        let b = Buffer::get(buf, true, "buf")?;
        let (region, dtype) = (b.region(), b.dtype.wire());
        let comm = self.comm();
        // SAFETY: buf stays exported until after the call and is writable.
        let n = blocking(py, || comm.recv_as(unsafe { region.bytes_mut() }, dtype, source, tag))
            .map_err(errors::comm)?;
        if n % b.itemsize != 0 {
            return Err(argument(format!(
                "Recv: rank {source} sent {n} bytes, not a whole number of {}-byte elements of the \
                 receive buffer ({})",
                b.itemsize,
                b.describe()
            )));
        }
        Ok(n / b.itemsize)
    }

    /// `Comm.Sendrecv` (documented on the Python method in `comm.rs`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sendrecv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        dest: i64,
        sendtag: i64,
        recvbuf: Option<&Bound<'_, PyAny>>,
        source: Option<i64>,
        recvtag: Option<i64>,
    ) -> PyResult<usize> {
        let dest = self.rank_arg(dest, "dest")?;
        let Some(source) = source else {
            return Err(argument("Sendrecv: pass source= (heddle has no ANY_SOURCE)"));
        };
        let source = self.rank_arg(source, "source")?;
        let tag = tag_arg(sendtag)?;
        if recvtag.is_some_and(|t| t != sendtag) {
            return Err(argument(
                "Sendrecv: heddle uses one tag for both directions; recvtag must equal sendtag",
            ));
        }
        let Some(recvbuf) = recvbuf else { return Err(argument("Sendrecv: pass recvbuf=")) };
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        let n = blocking(py, || {
            comm.sendrecv(
                unsafe { send_region.bytes() },
                dest,
                unsafe { recv_region.bytes_mut() },
                source,
                tag,
            )
        })
        .map_err(errors::comm)?;
        Ok(n / recv.itemsize)
    }

    /// `Comm._recv_bytes` (documented on the Python method in `comm.rs`).
    pub(crate) fn recv_bytes<'py>(
        &self,
        py: Python<'py>,
        source: i64,
        tag: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let source = self.rank_arg(source, "source")?;
        let tag = tag_arg(tag)?;
        let comm = self.comm();
        let v = blocking(py, || comm.recv_bytes(source, tag)).map_err(errors::comm)?;
        Ok(PyBytes::new(py, &v))
    }
}
