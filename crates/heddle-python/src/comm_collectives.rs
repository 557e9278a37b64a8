//! The bodies of `heddle._heddle.comm.Comm`'s collectives on equal blocks: `Allreduce`,
//! `Scan`, `Exscan`, `Reduce`, `Reduce_scatter_block`, `Bcast`, `Gather`, `Scatter`, `Allgather`, `Alltoall`.

use pyo3::prelude::*;

use crate::buffer::{Buffer, Region};
use crate::comm::PyComm;
use crate::comm_args::{aligned, check_len, check_pair, in_place, op_code};
use crate::errors::{self, argument};
use crate::interrupt::blocking;
use crate::op::{typed, with_element};

/// The reductions whose result replaces the receive buffer on every rank.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reduction {
    Allreduce,
    Scan,
    Exscan,
}

impl Reduction {
    /// The Python method's name, for errors.
    fn name(self) -> &'static str {
        match self {
            Reduction::Allreduce => "Allreduce",
            Reduction::Scan => "Scan",
            Reduction::Exscan => "Exscan",
        }
    }
}

impl PyComm {
    /// `Comm.Allreduce` (documented on the Python method in `comm.rs`).
    pub(crate) fn allreduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.in_place_reduction(py, Reduction::Allreduce, sendbuf, recvbuf, op)
    }

    /// `Comm.Allreduce`, `Comm.Scan` and `Comm.Exscan`: `sendbuf` copied into `recvbuf`
    /// (unless in place), then reduced there.
    pub(crate) fn in_place_reduction(
        &self,
        py: Python<'_>,
        reduction: Reduction,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let call = reduction.name();
        let code = op_code(op)?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        code.check(recv.dtype, call)?;
        let region = aligned(&recv, "recvbuf")?;
        if !in_place(sendbuf) && !sendbuf.is(recvbuf) {
            let send = Buffer::get(sendbuf, false, "sendbuf")?;
            check_pair(call, &send, "sendbuf", &recv, "recvbuf")?;
            check_len(call, "sendbuf", &send, recv.bytes(), "as many as recvbuf")?;
            // SAFETY: both buffers are exported; recvbuf is writable.
            unsafe { region.copy_from(send.region()) };
        }
        let (comm, dtype) = (self.comm(), recv.dtype);
        // SAFETY: recvbuf stays exported until after the call; it is writable and aligned.
        blocking(py, || {
            with_element!(dtype, T => {
                let buf = unsafe { region.typed_mut::<T>() };
                let op = typed::<T>(code);
                match reduction {
                    Reduction::Allreduce => comm.allreduce(buf, op),
                    Reduction::Scan => comm.scan(buf, op),
                    Reduction::Exscan => comm.exscan(buf, op),
                }
            })
        })
        .map_err(errors::comm)
    }

    /// `Comm.Reduce` (documented on the Python method in `comm.rs`).
    pub(crate) fn reduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let code = op_code(op)?;
        let is_root = self.comm().rank() == root;
        let recv = match (is_root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(r)) => Some(Buffer::get(r, true, "recvbuf")?),
            (true, None) => return Err(argument("Reduce: the root must pass a recvbuf")),
            (false, _) => None,
        };
        let send =
            if in_place(sendbuf) { None } else { Some(Buffer::get(sendbuf, false, "sendbuf")?) };
        let mut _temp = None;
        let (send_region, dtype) = match (send.as_ref(), recv.as_ref()) {
            (None, None) => {
                return Err(argument("Reduce: sendbuf may be heddle.IN_PLACE only at the root"))
            }
            (None, Some(r)) => {
                // SAFETY: recvbuf is exported.
                let (words, copy) = unsafe { r.region().to_temp() };
                _temp = Some(words);
                (copy, r.dtype)
            }
            (Some(s), r) => {
                let mut region = aligned(s, "sendbuf")?;
                if let Some(r) = r {
                    check_pair("Reduce", s, "sendbuf", r, "recvbuf")?;
                    check_len("Reduce", "recvbuf", r, s.bytes(), "as many as sendbuf")?;
                    // SAFETY: sendbuf is exported.
                    (region, _temp) = unsafe { region.apart_from(r.region()) };
                }
                (region, s.dtype)
            }
        };
        code.check(dtype, "Reduce")?;
        let recv_region = match recv.as_ref() {
            Some(r) => aligned(r, "recvbuf")?,
            None => Region::scratch(0).1,
        };
        let comm = self.comm();
        // SAFETY: every region is exported (or owned here) until after the call, the
        // receive region is writable and distinct from the send region, both aligned.
        let result = blocking(py, || {
            with_element!(dtype, T => comm.reduce(
                unsafe { send_region.typed::<T>() },
                unsafe { recv_region.typed_mut::<T>() },
                typed::<T>(code),
                root
            ))
        });
        drop(send);
        result.map_err(errors::comm)
    }

    /// `Comm.Reduce_scatter_block` (documented on the Python method in `comm.rs`).
    pub(crate) fn reduce_scatter_block(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let code = op_code(op)?;
        if in_place(sendbuf) {
            return Err(argument(
                "Reduce_scatter_block: heddle.IN_PLACE is not supported; pass sendbuf",
            ));
        }
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        check_pair("Reduce_scatter_block", &send, "sendbuf", &recv, "recvbuf")?;
        check_len(
            "Reduce_scatter_block",
            "sendbuf",
            &send,
            recv.bytes() * self.comm().size(),
            "size blocks as large as recvbuf",
        )?;
        code.check(recv.dtype, "Reduce_scatter_block")?;
        let (send_region, recv_region) = (aligned(&send, "sendbuf")?, aligned(&recv, "recvbuf")?);
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let (comm, dtype) = (self.comm(), recv.dtype);
        // SAFETY: as in `Reduce`.
        blocking(py, || {
            with_element!(dtype, T => comm.reduce_scatter_block(
                unsafe { send_region.typed::<T>() },
                unsafe { recv_region.typed_mut::<T>() },
                typed::<T>(code)
            ))
        })
        .map_err(errors::comm)
    }

    /// `Comm.Reduce_scatter` (documented on the Python method in `comm.rs`).
    pub(crate) fn reduce_scatter(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        recvcounts: Option<Vec<usize>>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let what = "Reduce_scatter";
        let code = op_code(op)?;
        if in_place(sendbuf) {
            return Err(argument(format!(
                "{what}: heddle.IN_PLACE is not supported; pass sendbuf"
            )));
        }
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        check_pair(what, &send, "sendbuf", &recv, "recvbuf")?;
        code.check(recv.dtype, what)?;
        let comm = self.comm();
        let counts = match recvcounts {
            Some(c) => {
                self.counts_arg(&c, what, 1)?;
                c
            }
            None => {
                // Every rank's recvbuf size, as mpi4py derives them.
                let mut all = vec![0u64; comm.size()];
                let mine = [recv.elements() as u64];
                blocking(py, || comm.allgather(&mine, &mut all)).map_err(errors::comm)?;
                all.into_iter().map(|c| c as usize).collect()
            }
        };
        let (send_region, recv_region) = (aligned(&send, "sendbuf")?, aligned(&recv, "recvbuf")?);
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let dtype = recv.dtype;
        // SAFETY: as in `Reduce`.
        blocking(py, || {
            with_element!(dtype, T => comm.reduce_scatter(
                unsafe { send_region.typed::<T>() },
                unsafe { recv_region.typed_mut::<T>() },
                &counts,
                typed::<T>(code)
            ))
        })
        .map_err(errors::comm)
    }

    /// `Comm.Bcast` (documented on the Python method in `comm.rs`).
    pub(crate) fn bcast(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i64) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let is_root = self.comm().rank() == root;
        let b = Buffer::get(buf, !is_root, "buf")?;
        let mut region = b.region();
        let mut _temp = None;
        if is_root && !b.writable {
            // The algorithm may write the root's own bytes back: give it a private copy.
            // SAFETY: buf is exported.
            let (words, copy) = unsafe { region.to_temp() };
            (region, _temp) = (copy, Some(words));
        }
        let comm = self.comm();
        // SAFETY: buf (or its copy) stays alive until after the call and is writable.
        blocking(py, || comm.broadcast(unsafe { region.bytes_mut() }, root)).map_err(errors::comm)
    }

    /// `Comm.Gather` (documented on the Python method in `comm.rs`).
    pub(crate) fn gather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let (p, me) = (self.comm().size(), self.comm().rank());
        let recv = match (me == root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(r)) => Some(Buffer::get(r, true, "recvbuf")?),
            (true, None) => return Err(argument("Gather: the root must pass a recvbuf")),
            (false, _) => None,
        };
        let send =
            if in_place(sendbuf) { None } else { Some(Buffer::get(sendbuf, false, "sendbuf")?) };
        let mut _temp = None;
        let mut send_region = match (send.as_ref(), recv.as_ref()) {
            (None, None) => {
                return Err(argument("Gather: sendbuf may be heddle.IN_PLACE only at the root"))
            }
            (None, Some(r)) => {
                if r.bytes() % p != 0 {
                    return Err(argument(format!(
                        "Gather: recvbuf ({}) does not split into {p} equal blocks",
                        r.describe()
                    )));
                }
                let block = r.bytes() / p;
                // SAFETY: recvbuf is exported.
                let (words, copy) = unsafe { r.region().slice(me * block, block).to_temp() };
                _temp = Some(words);
                copy
            }
            (Some(s), r) => {
                if let Some(r) = r {
                    check_pair("Gather", s, "sendbuf", r, "recvbuf")?;
                    check_len("Gather", "recvbuf", r, s.bytes() * p, "one sendbuf per rank")?;
                }
                s.region()
            }
        };
        let recv_region = recv.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        if send.is_some() && send_region.overlaps(recv_region) {
            // SAFETY: sendbuf is exported.
            let (words, copy) = unsafe { send_region.to_temp() };
            (send_region, _temp) = (copy, Some(words));
        }
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.gather(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() }, root)
        })
        .map_err(errors::comm)
    }

    /// `Comm.Scatter` (documented on the Python method in `comm.rs`).
    pub(crate) fn scatter(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let (p, is_root) = (self.comm().size(), self.comm().rank() == root);
        let send = match (is_root, sendbuf.filter(|s| !s.is_none())) {
            (true, Some(s)) => Some(Buffer::get(s, false, "sendbuf")?),
            (true, None) => return Err(argument("Scatter: the root must pass a sendbuf")),
            (false, _) => None,
        };
        let mut _temp = None;
        let (recv, recv_region) = if in_place(recvbuf) {
            let Some(s) = send.as_ref() else {
                return Err(argument("Scatter: recvbuf may be heddle.IN_PLACE only at the root"));
            };
            if s.bytes() % p != 0 {
                return Err(argument(format!(
                    "Scatter: sendbuf ({}) does not split into {p} equal blocks",
                    s.describe()
                )));
            }
            let (words, scratch) = Region::scratch(s.bytes() / p);
            _temp = Some(words);
            (None, scratch)
        } else {
            let r = Buffer::get(recvbuf, true, "recvbuf")?;
            let region = r.region();
            (Some(r), region)
        };
        let send_region = send.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        if let (Some(s), Some(r)) = (send.as_ref(), recv.as_ref()) {
            check_pair("Scatter", s, "sendbuf", r, "recvbuf")?;
            check_len("Scatter", "sendbuf", s, r.bytes() * p, "one recvbuf per rank")?;
        }
        // SAFETY: sendbuf is exported.
        let (send_region, _send_copy) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.scatter(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() }, root)
        })
        .map_err(errors::comm)
    }

    /// `Comm.Allgather` (documented on the Python method in `comm.rs`).
    pub(crate) fn allgather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (p, me) = (self.comm().size(), self.comm().rank());
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let recv_region = recv.region();
        let mut _temp = None;
        let (_send, send_region) = if in_place(sendbuf) {
            if recv.bytes() % p != 0 {
                return Err(argument(format!(
                    "Allgather: recvbuf ({}) does not split into {p} equal blocks",
                    recv.describe()
                )));
            }
            let block = recv.bytes() / p;
            // SAFETY: recvbuf is exported.
            let (words, copy) = unsafe { recv_region.slice(me * block, block).to_temp() };
            _temp = Some(words);
            (None, copy)
        } else {
            let s = Buffer::get(sendbuf, false, "sendbuf")?;
            check_pair("Allgather", &s, "sendbuf", &recv, "recvbuf")?;
            check_len("Allgather", "recvbuf", &recv, s.bytes() * p, "one sendbuf per rank")?;
            let mut region = s.region();
            // SAFETY: sendbuf is exported.
            (region, _temp) = unsafe { region.apart_from(recv_region) };
            (Some(s), region)
        };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.allgather(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() })
        })
        .map_err(errors::comm)
    }

    /// `Comm.Alltoall` (documented on the Python method in `comm.rs`).
    pub(crate) fn alltoall(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let p = self.comm().size();
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let recv_region = recv.region();
        if recv.bytes() % p != 0 {
            return Err(argument(format!(
                "Alltoall: recvbuf ({}) does not split into {p} equal blocks",
                recv.describe()
            )));
        }
        let mut _temp = None;
        let (_send, send_region) = if in_place(sendbuf) || sendbuf.is(recvbuf) {
            // SAFETY: recvbuf is exported.
            let (words, copy) = unsafe { recv_region.to_temp() };
            _temp = Some(words);
            (None, copy)
        } else {
            let s = Buffer::get(sendbuf, false, "sendbuf")?;
            check_pair("Alltoall", &s, "sendbuf", &recv, "recvbuf")?;
            check_len("Alltoall", "sendbuf", &s, recv.bytes(), "as many as recvbuf")?;
            let mut region = s.region();
            // SAFETY: sendbuf is exported.
            (region, _temp) = unsafe { region.apart_from(recv_region) };
            (Some(s), region)
        };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.alltoall(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() })
        })
        .map_err(errors::comm)
    }
}
