"""Collectives across simulated hosts: 3 network namespaces joined by a bridge, 2 ranks on
each. Heddle forced host-aware (shared memory inside a host, one leader per host across;
for allreduce also the two-level algorithm: reduce-scatter inside hosts, one allreduce per
block across, allgather inside),
Heddle forced flat (the table's choice for one host, by size), and Open
MPI over TCP in the same namespaces (mpi4py, benches/.venv-mpi: `benches/mpi/setup.sh`),
in one run. Prints p50 latencies and the ratios; --json writes them.

Needs root and iproute2. Run from the repository root after `make build`::

    python3 benches/hosts/bench_hosts.py [--sizes 8,1024,...] [--quick] [--json out.json]

Every process of the six shares this machine's cores, so both sides are told to yield
rather than spin when idle (HEDDLE_SPIN_POLLS=16; Open MPI's mpi_yield_when_idle). Open MPI
uses its TCP transport even between two ranks of one namespace: its shared-memory transport
(vader) crashes when the "hosts" share a hostname, as namespaces do. Open MPI's TCP links are
plaintext, so Heddle's are too here (HEDDLE_SECURITY=none); bench_security.py measures what
TLS and HMAC cost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "target" / "release"
HOSTS = 3
PER_HOST = 2
SUBNET = "10.213.251"
FLAT = {  # the table's choice on one host (tuning.json), by bytes
    "allreduce": [(16384, "recursive_doubling"), (None, "ring")],
    "broadcast": [(131072, "binomial_tree"), (None, "scatter_allgather")],
    "allgather": [(4096, "bruck"), (None, "ring")],
}


def sh(cmd: str, check: bool = True) -> None:
    subprocess.run(["sh", "-c", cmd], check=check, capture_output=True)


class Net:
    """HOSTS network namespaces on a bridge; with ``rate`` (tc's units, "10gbit") each host
    sends at most that fast (a token bucket of 64 KiB), like a host's network card."""

    def __init__(self, rate: str | None = None) -> None:
        self.rate = rate
        self.tag = str(os.getpid() % 10000)
        self.names = [f"hbn{self.tag}{chr(97 + h)}" for h in range(HOSTS)]

    def __enter__(self) -> Self:
        try:
            self._create()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _create(self) -> None:
        t = self.tag
        sh(f"ip link add hbb{t} type bridge && ip addr add {SUBNET}.254/24 dev hbb{t}")
        sh(f"ip link set hbb{t} up")
        for h, ns in enumerate(self.names):
            v = f"hbv{t}{chr(97 + h)}"
            sh(
                f"ip netns add {ns} && ip link add {v} type veth peer name eth0 netns {ns} "
                f"&& ip link set {v} master hbb{t} && ip link set {v} up "
                f"&& ip -n {ns} addr add {SUBNET}.{h + 1}/24 dev eth0 "
                f"&& ip -n {ns} link set eth0 up && ip -n {ns} link set lo up"
            )
            if self.rate:
                sh(
                    f"ip netns exec {ns} tc qdisc add dev eth0 root tbf rate {self.rate} "
                    "burst 64kb latency 50ms"
                )

    def __exit__(self, *exc: object) -> None:
        for ns in self.names:
            sh(f"ip netns del {ns}", check=False)
        sh(f"ip link del hbb{self.tag}", check=False)


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        start = line.find('{"system"')
        if start >= 0:
            out.append(json.loads(line[start:]))
    return out


def heddle(
    net: Net, flags: list[str], algorithms: str, extra: dict[str, str] | None = None
) -> list[dict]:
    program = " ".join([str(RELEASE / "examples" / "bench_collectives"), *flags])
    script = (
        f"set -- {' '.join(net.names)}; i=$((HEDDLE_RANK / {PER_HOST} + 1)); "
        f"eval ns=\\${{$i}}; HEDDLE_HOST_ID=host-$i exec ip netns exec $ns {program}"
    )
    # Plaintext links, as Open MPI's TCP transport, unless told (bench_security.py).
    env = {
        **os.environ,
        "HEDDLE_SPIN_POLLS": "16",
        "HEDDLE_ALGORITHMS": algorithms,
        "HEDDLE_SECURITY": "none",
        **(extra or {}),
    }
    n = str(HOSTS * PER_HOST)
    cmd = [str(RELEASE / "heddle"), "run", "-n", n, "--master-bind", f"{SUBNET}.254:0"]
    p = subprocess.run(
        [*cmd, "--", "sh", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    if p.returncode != 0:
        sys.exit(f"heddle run failed:\n{p.stderr}")
    return json_lines(p.stdout)


def mpi(net: Net, flags: list[str], tmp: Path) -> list[dict]:
    python = ROOT / "benches" / ".venv-mpi" / "bin" / "python"
    if not python.exists():
        sys.exit("benches/.venv-mpi is missing: run benches/mpi/setup.sh")
    agent = tmp / "ns-agent.sh"
    agent.write_text('#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n')
    agent.chmod(0o700)
    hostfile = tmp / "hosts"
    hostfile.write_text("".join(f"{ns} slots={PER_HOST}\n" for ns in net.names))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-n", str(HOSTS * PER_HOST), "--hostfile", str(hostfile), "--bind-to", "none"]
    for k, v in [
        ("plm_rsh_agent", str(agent)),
        ("oob_tcp_if_include", f"{SUBNET}.0/24"),
        ("btl", "self,tcp"),
        ("btl_tcp_if_include", f"{SUBNET}.0/24"),
        ("mpi_yield_when_idle", "1"),
    ]:
        cmd += ["--mca", k, v]
    script = str(ROOT / "benches" / "mpi" / "bench_collectives.py")
    p = subprocess.run(
        [*cmd, str(python), script, *flags], env=env, capture_output=True, text=True, check=False
    )
    if p.returncode != 0:
        sys.exit(f"mpirun failed:\n{p.stderr[-3000:]}")
    return json_lines(p.stdout)


def p50(lines: list[dict], collective: str, size: int) -> float:
    return float(
        next(r["p50_us"] for r in lines if r["collective"] == collective and r["bytes"] == size)
    )


def flat_choice(collective: str, size: int) -> str:
    for limit, alg in FLAT[collective]:
        if limit is None or size <= limit:
            return alg
    raise AssertionError


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,1024,65536,1048576,16777216")
    ap.add_argument("--collectives", default="allreduce,broadcast")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    flags = ["--sizes", args.sizes, "--collectives", args.collectives]
    flags += ["--quick"] if args.quick else []
    sizes = [int(s) for s in args.sizes.split(",")]
    colls = args.collectives.split(",")
    with Net() as net, tempfile.TemporaryDirectory() as tmp:
        hier = heddle(net, flags, ",".join(f"{c}=hierarchical" for c in colls))
        two_level = heddle(net, flags, "allreduce=two_level") if "allreduce" in colls else []
        # One run per flat algorithm, forced on the collectives it serves.
        algorithms = sorted({a for c in colls for _, a in FLAT[c]})
        flat_runs = {
            alg: heddle(
                net, flags, ",".join(f"{c}={alg}" for c in colls if alg in dict(FLAT[c]).values())
            )
            for alg in algorithms
        }
        ompi = mpi(net, flags, Path(tmp))
    rows = []
    for c in colls:
        for size in sizes:
            f = p50(flat_runs[flat_choice(c, size)], c, size)
            h, m = p50(hier, c, size), p50(ompi, c, size)
            t = p50(two_level, c, size) if c == "allreduce" else None
            rows.append(
                {
                    "collective": c,
                    "bytes": size,
                    "hierarchical_us": h,
                    "two_level_us": t,
                    "flat_us": f,
                    "openmpi_tcp_us": m,
                    "flat_over_hier": f / h,
                    "openmpi_over_hier": m / h,
                }
            )
    print(
        "| collective | bytes | host-aware p50 µs | two-level p50 µs | flat p50 µs "
        "| Open MPI TCP p50 µs | flat / host-aware | Open MPI / host-aware |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = "–" if r["two_level_us"] is None else f"{r['two_level_us']:.1f}"
        print(
            f"| {r['collective']} | {r['bytes']} | {r['hierarchical_us']:.1f} | {t} | "
            f"{r['flat_us']:.1f} | {r['openmpi_tcp_us']:.1f} | {r['flat_over_hier']:.2f} | "
            f"{r['openmpi_over_hier']:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
