//! The launcher's own key-value store, PMIx, as a rendezvous: under `mpirun` (and `srun
//! --mpi=pmix`) rank 0 publishes its master's address there and the other ranks read it,
//! with no shared directory between the hosts — as MPI libraries exchange their endpoints.
//!
//! `libpmix.so.2` is opened at run time, so that Heddle runs where it is missing (the
//! rendezvous file serves then). Only the stable PMIx v2+ client calls are used: `Init`,
//! `Put`, `Commit`, `Get` (which waits until the key is published, up to a timeout) and
//! `Finalize`. The structures are laid out as PMIx 2–5 lay them out on 64-bit Linux:
//! `pmix_proc_t` is a 256-byte namespace and a `u32` rank, `pmix_value_t` 32 bytes,
//! `pmix_info_t` 552 bytes with its value at byte 520 (checked against the headers of
//! PMIx 4.2).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::{Duration, Instant};

use libloading::Library;

use crate::{Error, Result};

/// `PMIX_MAX_NSLEN + 1`.
const NSPACE_BYTES: usize = 256;
const VALUE_BYTES: usize = 32;
const INFO_BYTES: usize = 552;
const PMIX_SUCCESS: c_int = 0;
const PMIX_INT: u16 = 6;
const PMIX_STRING: u16 = 3;
const PMIX_BOOL: u16 = 1;
const PMIX_ERR_NOT_FOUND: c_int = -46;
const PMIX_GLOBAL: u8 = 3;
const PMIX_TIMEOUT: &CStr = c"pmix.timeout";
const PMIX_GET_REFRESH_CACHE: &CStr = c"pmix.get.refresh";

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; NSPACE_BYTES],
    rank: u32,
}

/// `pmix_value_t` and `pmix_info_t`, as opaque aligned bytes the library fills.
#[repr(C, align(8))]
struct Value([u8; VALUE_BYTES]);
#[repr(C, align(8))]
struct Info([u8; INFO_BYTES]);

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type ValueLoadFn = unsafe extern "C" fn(*mut Value, *const c_void, u16) -> c_int;
type ValueUnloadFn = unsafe extern "C" fn(*mut Value, *mut *mut c_void, *mut usize) -> c_int;
type ValueDestructFn = unsafe extern "C" fn(*mut Value);
type InfoLoadFn = unsafe extern "C" fn(*mut Info, *const c_char, *const c_void, u16) -> c_int;

/// A PMIx client session, finalized when dropped.
pub(crate) struct Pmix {
    lib: Library,
    me: Proc,
}

impl Pmix {
    /// Connects to the launcher's PMIx server: `None` when the launcher offers none (no
    /// `PMIX_NAMESPACE`/`PMIX_RANK`), the library is missing, or the server refuses (that
    /// is logged), so that the caller falls back to a rendezvous file.
    pub(crate) fn connect() -> Option<Pmix> {
        if std::env::var_os("PMIX_NAMESPACE").is_none() || std::env::var_os("PMIX_RANK").is_none() {
            return None;
        }
        // SAFETY: loading libpmix runs its initialisers, which have no preconditions.
        let lib = match unsafe { Library::new("libpmix.so.2") } {
            Ok(lib) => lib,
            Err(e) => {
                tracing::debug!("no PMIx client library ({e}): rendezvous by file");
                return None;
            }
        };
        let mut me = Proc { nspace: [0; NSPACE_BYTES], rank: 0 };
        // SAFETY: PMIx_Init fills `me`; no info is passed.
        let status = unsafe {
            match lib.get::<InitFn>(b"PMIx_Init\0") {
                Ok(init) => init(&mut me, std::ptr::null_mut(), 0),
                Err(_) => return None,
            }
        };
        if status != PMIX_SUCCESS {
            tracing::warn!("the launcher's PMIx server refused this rank (status {status}): rendezvous by file");
            return None;
        }
        Some(Pmix { lib, me })
    }

    /// This rank, as the PMIx server knows it.
    pub(crate) fn rank(&self) -> u32 {
        self.me.rank
    }

    /// The job's namespace (its id at the launcher).
    pub(crate) fn namespace(&self) -> String {
        // SAFETY: PMIx_Init wrote a NUL-terminated namespace into the zeroed array.
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }.to_string_lossy().into_owned()
    }

    fn symbol<T: Copy>(&self, name: &[u8]) -> Result<T> {
        // SAFETY: every name is given with the type of its declaration in pmix.h.
        unsafe { self.lib.get::<T>(name).map(|s| *s) }.map_err(|e| {
            Error::Env(format!(
                "the PMIx library has no {}: {e}",
                String::from_utf8_lossy(&name[..name.len() - 1])
            ))
        })
    }

    /// Publishes `value` under `key` to every rank of the job, at once.
    ///
    /// # Errors
    /// [`Error::Env`] when the server refuses it.
    pub(crate) fn publish(&self, key: &str, value: &str) -> Result<()> {
        let (key_c, value_c) = (cstring(key)?, cstring(value)?);
        let load: ValueLoadFn = self.symbol(b"PMIx_Value_load\0")?;
        let destruct: ValueDestructFn = self.symbol(b"PMIx_Value_destruct\0")?;
        let put: PutFn = self.symbol(b"PMIx_Put\0")?;
        let commit: CommitFn = self.symbol(b"PMIx_Commit\0")?;
        let mut v = Value([0; VALUE_BYTES]);
        // SAFETY: `v` is a zeroed pmix_value_t; a string is loaded from a `char *` (copied),
        // Put copies the value, and destruct frees the loaded copy once.
        let status = unsafe {
            check(load(&mut v, value_c.as_ptr().cast(), PMIX_STRING), "PMIx_Value_load")?;
            let put = put(PMIX_GLOBAL, key_c.as_ptr(), &mut v);
            destruct(&mut v);
            check(put, "PMIx_Put")?;
            commit()
        };
        check(status, "PMIx_Commit")
    }

    /// The value rank `rank` published under `key`, waiting up to `timeout` for it.
    ///
    /// # Errors
    /// [`Error::Timeout`] when it is not published in time; [`Error::Env`] for a value that
    /// is not a string.
    pub(crate) fn lookup(&self, rank: u32, key: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        let mut refresh = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.get(rank, key, left, refresh)? {
                Ok(value) => return self.string_of(rank, key, value),
                // A Get racing the publisher's Commit may answer "not found" at once instead
                // of waiting (openpmix issue #2904; seen in CI): ask again, past the client's
                // cache, until the deadline.
                Err(PMIX_ERR_NOT_FOUND) if !left.is_zero() => {
                    refresh = true;
                    std::thread::sleep(Duration::from_millis(20).min(left));
                }
                Err(status) => {
                    return Err(Error::Timeout(format!(
                        "rank {} waited {timeout:?} for rank {rank} to publish {key:?} through \
                         the launcher's PMIx server (status {status}; HEDDLE_INIT_TIMEOUT_S): \
                         did rank {rank} start?",
                        self.me.rank
                    )))
                }
            }
        }
    }

    /// One `PMIx_Get` of rank `rank`'s `key`, waiting up to `wait` on the server: the value
    /// (allocated by PMIx) or the status it answered.
    fn get(
        &self,
        rank: u32,
        key: &str,
        wait: Duration,
        refresh: bool,
    ) -> Result<std::result::Result<*mut Value, c_int>> {
        let key_c = cstring(key)?;
        let info_load: InfoLoadFn = self.symbol(b"PMIx_Info_load\0")?;
        let get: GetFn = self.symbol(b"PMIx_Get\0")?;
        let of = Proc { rank, ..self.me };
        let secs = c_int::try_from(wait.as_secs().max(1)).unwrap_or(c_int::MAX);
        let mut info = [Info([0; INFO_BYTES]), Info([0; INFO_BYTES])];
        let infos = if refresh { 2 } else { 1 };
        let mut value: *mut Value = std::ptr::null_mut();
        // SAFETY: `info` holds zeroed pmix_info_t structs loaded with an int and a bool (both
        // copied in); Get reads `infos` of them and allocates `value` only on success.
        unsafe {
            let [timeout_info, refresh_info] = &mut info;
            check(
                info_load(
                    timeout_info,
                    PMIX_TIMEOUT.as_ptr(),
                    (&secs as *const c_int).cast(),
                    PMIX_INT,
                ),
                "PMIx_Info_load",
            )?;
            check(
                info_load(
                    refresh_info,
                    PMIX_GET_REFRESH_CACHE.as_ptr(),
                    (&true as *const bool).cast(),
                    PMIX_BOOL,
                ),
                "PMIx_Info_load",
            )?;
            let status = get(&of, key_c.as_ptr(), info.as_ptr(), infos, &mut value);
            Ok(if status == PMIX_SUCCESS && !value.is_null() { Ok(value) } else { Err(status) })
        }
    }

    /// The string a successful Get returned, freeing what PMIx allocated.
    fn string_of(&self, rank: u32, key: &str, value: *mut Value) -> Result<String> {
        let unload: ValueUnloadFn = self.symbol(b"PMIx_Value_unload\0")?;
        let destruct: ValueDestructFn = self.symbol(b"PMIx_Value_destruct\0")?;
        // SAFETY: `value` is the pmix_value_t Get allocated (malloc); unload copies its string
        // out (malloc), and both are freed here once.
        unsafe {
            let kind = u16::from_ne_bytes([(*value).0[0], (*value).0[1]]);
            let (mut data, mut size) = (std::ptr::null_mut::<c_void>(), 0usize);
            let unloaded = unload(value, &mut data, &mut size);
            destruct(value);
            libc::free(value.cast());
            check(unloaded, "PMIx_Value_unload")?;
            if kind != PMIX_STRING || data.is_null() {
                if !data.is_null() {
                    libc::free(data);
                }
                return Err(Error::Env(format!(
                    "rank {rank}'s {key:?} in the launcher's PMIx store is not a string (type \
                     {kind}): another program published it"
                )));
            }
            let text = CStr::from_ptr(data.cast()).to_string_lossy().into_owned();
            libc::free(data);
            Ok(text)
        }
    }
}

impl Drop for Pmix {
    fn drop(&mut self) {
        if let Ok(finalize) = self.symbol::<FinalizeFn>(b"PMIx_Finalize\0") {
            // SAFETY: ends the session Init opened (PMIx counts Init and Finalize calls).
            unsafe { finalize(std::ptr::null(), 0) };
        }
    }
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Env(format!("{s:?} holds a NUL byte")))
}

fn check(status: c_int, call: &str) -> Result<()> {
    if status == PMIX_SUCCESS {
        Ok(())
    } else {
        Err(Error::Env(format!("the launcher's PMIx server failed {call} (status {status})")))
    }
}
