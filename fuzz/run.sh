#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz: libFuzzer + AddressSanitizer) of every decoder of
# untrusted bytes: `decode` (heddle-wire frames), `control` (control messages between
# workers and the job master), `text_readers` (heddle-data's CSV and JSON-lines readers),
# `python_records` (the Python extension's record and key decoders; it embeds libpython3).
#
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   (default: 600 seconds each, every target)
# Exits non-zero if any target finds a crash (the input is kept under fuzz/artifacts/).
# cargo-fuzz passes -Z flags; RUSTC_BOOTSTRAP=1 lets a stable toolchain accept them.
set -euo pipefail
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decode control text_readers python_records)
here="$(cd "$(dirname "$0")" && pwd)"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Seeds: the golden wire vectors for the frame decoders, small well-formed files for the
# readers (libFuzzer mutates them into everything else); python_records writes its own.
for t in decode control; do
    mkdir -p "$here/corpus/$t"
    cp "$here"/../spec/vectors/*.bin "$here/corpus/$t/"
done
mkdir -p "$here/corpus/text_readers"
printf 'a,b,c\r\n1,"x,y",3\n\n4,5\n"q""uote",,\n' > "$here/corpus/text_readers/csv"
printf '{"a": 1, "b": [1, 2]}\n\n[1, "x"]\r\n"s"\n{"bad": \n' > "$here/corpus/text_readers/jsonl"
mkdir -p "$here/corpus/python_records"

cd "$here"
export RUSTC_BOOTSTRAP=1

# Build every target first, so a build failure is reported as one (its compiler errors
# printed last, where a CI log's tail shows them) rather than as a fuzzing failure. A
# failed build is tried once more: a registry download can fail for a moment.
echo "== building the fuzz targets (${targets[*]})"
build_log="$(mktemp)"
trap 'rm -f "$build_log"' EXIT
for attempt in 1 2; do
    : >"$build_log"
    built=1
    for t in "${targets[@]}"; do
        cargo fuzz build -O "$t" >>"$build_log" 2>&1 || { built=0; break; }
    done
    [ "$built" = 1 ] && break
    echo "== fuzz/run.sh: building the fuzz targets failed (attempt $attempt of 2):" >&2
    grep -E -A12 '^(error|warning: build failed)|error:|killed|SIGKILL|No space' \
        "$build_log" | tail -n 80 >&2 || tail -n 80 "$build_log" >&2
    free -m >&2 || true
    df -h "$here" >&2 || true
    [ "$attempt" = 2 ] && exit 1
done
for t in "${targets[@]}"; do
    echo "== fuzzing $t for ${seconds}s"
    vars=()
    if [ "$t" = python_records ]; then
        # It writes its seeds (encodings made by the extension's own encoders) into
        # HEDDLE_FUZZ_SEED_DIR before it reads the corpus. The ASan and PYTHONMALLOC
        # settings its embedded interpreter needs it makes itself (see the target).
        vars=(HEDDLE_FUZZ_SEED_DIR="$here/corpus/$t")
    fi
    env "${vars[@]}" cargo fuzz run -O "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 -max_len=4096
done
