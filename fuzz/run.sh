#!/usr/bin/env bash
# Fuzzes the heddle-wire decoder with cargo-fuzz (libFuzzer + AddressSanitizer).
# Usage: fuzz/run.sh [SECONDS]   (default 600). Seeds the corpus with spec/vectors/*.bin.
# cargo-fuzz passes -Z flags; RUSTC_BOOTSTRAP=1 lets a stable toolchain accept them.
set -euo pipefail
seconds="${1:-600}"
here="$(cd "$(dirname "$0")" && pwd)"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

mkdir -p "$here/corpus/decode"
cp "$here"/../spec/vectors/*.bin "$here/corpus/decode/"

cd "$here"
export RUSTC_BOOTSTRAP=1
exec cargo fuzz run decode corpus/decode -- \
    -max_total_time="$seconds" -print_final_stats=1 -max_len=4096
