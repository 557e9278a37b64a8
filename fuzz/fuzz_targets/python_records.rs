//! Fuzz target: the Python extension's record and key decoders (heddle-python's
//! `record::decode`) on arbitrary bytes, as records, keys and keyed records arrive from
//! peers and spill runs.
//!
//! Decoding must never crash; what decodes must re-encode (with the extension's own
//! encoders) to something that decodes equal; what does not must raise `heddle.CommError`.
//! The layout of an input and the checks are in `heddle_python::fuzz`. Nothing is ever
//! unpickled: pickled records and keys (tags V_PICKLE, K_OTHER, also inside tuples) are
//! malformed in the `fuzzing` build of the extension, and `pickle.loads` is replaced by a
//! tripwire that aborts.
//!
//! The interpreter (libpython3) is embedded, so the target sets up ASan for it itself, the
//! same however it is run (`fuzz/run.sh`, `cargo fuzz run`, reproducing an artifact):
//! PYTHONMALLOC=malloc puts Python objects on the malloc ASan intercepts (a use after free
//! of one is caught too), and leak checks are off (the interpreter's own allocations live
//! until exit). With HEDDLE_FUZZ_SEED_DIR set, the target first writes encodings of a few
//! objects there as seeds (libFuzzer initializes the target before it reads its corpus).

#![no_main]

use std::ffi::c_char;

use libfuzzer_sys::fuzz_target;

/// ASan's defaults for this binary (ASAN_OPTIONS still overrides them): no leak checks,
/// neither at exit nor libFuzzer's after each input.
#[no_mangle]
pub extern "C" fn __asan_default_options() -> *const c_char {
    c"detect_leaks=0".as_ptr()
}

fuzz_target!(
    init: {
        // Read when the interpreter starts, which is below.
        if std::env::var_os("PYTHONMALLOC").is_none() {
            std::env::set_var("PYTHONMALLOC", "malloc");
        }
        if let Some(dir) = std::env::var_os("HEDDLE_FUZZ_SEED_DIR") {
            heddle_python::fuzz::write_seeds(std::path::Path::new(&dir))
                .expect("writing the seeds");
        }
    },
    |data: &[u8]| heddle_python::fuzz::decode_records(data)
);
