#!/usr/bin/env bash
# Idempotent setup of the MPI peer for `heddle bench collectives --vs mpi`.
#
#   * installs Debian's Open MPI (openmpi-bin, libopenmpi-dev) with apt-get if `mpirun` is missing
#     (needs root or passwordless sudo);
#   * creates the virtualenv benches/.venv-mpi with the pinned numpy and mpi4py of
#     requirements.txt (mpi4py compiled against the system Open MPI with mpicc);
#   * prints the venv's python path on its LAST line of stdout (callers read that line).
#
# Everything else goes to stderr so that stdout stays parseable.
# Re-running is cheap: nothing is reinstalled once the venv matches requirements.txt.
#
# Environment: PYTHON=python interpreter used to create the venv (default: python3).
#
# Running the peer (what `heddle bench collectives --vs mpi` does; details in README.md):
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   only needed as root
#   mpirun -n R [--oversubscribe]                                 the latter when R > cores
#          --bind-to none                                         ranks unpinned, like Heddle's
#          --mca pml ob1 --mca btl self,vader                     shared memory, no probing
#          --mca btl_vader_single_copy_mechanism none             faster here than CMA
#          benches/.venv-mpi/bin/python benches/mpi/bench_collectives.py
# In this container the defaults work too (no btl/CMA errors); the flags above are the fastest
# configuration measured on the 2-core dev VM.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
benches="$(dirname "$here")"
venv="$benches/.venv-mpi"
req="$here/requirements.txt"
stamp="$venv/.requirements.stamp"

log() { echo "[bench/mpi setup] $*" >&2; }

# 1. Open MPI -------------------------------------------------------------------------------
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    log "mpirun/mpicc missing: installing openmpi-bin libopenmpi-dev with apt-get"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
            log "not root and no sudo: install openmpi-bin and libopenmpi-dev yourself"; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q >&2
    $sudo apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi-dev >&2
fi

# 2. virtualenv with numpy + mpi4py --------------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv"
    "${PYTHON:-python3}" -m venv "$venv" >&2
fi
if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp" \
    || ! "$venv/bin/python" -c "import numpy, mpi4py.MPI" >/dev/null 2>&1; then
    log "installing $(grep -v '^#' "$req" | xargs) into $venv"
    "$venv/bin/python" -m pip install -q --upgrade pip >&2
    # Build mpi4py from source against the system MPI (MPICC is what mpi4py's build uses).
    MPICC="$(command -v mpicc)" "$venv/bin/python" -m pip install -q \
        --no-binary mpi4py -r "$req" >&2
    cp "$req" "$stamp"
fi

echo "$venv/bin/python"
