"""The ``heddle`` command of the Python package (also ``python -m heddle``).

``heddle run -n N [options] PROGRAM [ARGS...]`` launches a job exactly as the Rust
``heddle run`` does — it calls the same launcher, compiled into the extension. A
``PROGRAM`` ending in ``.py``, or starting with ``-m``/``-c``, runs under this Python
interpreter, so ``heddle run -n 4 script.py`` starts ``python script.py`` four times.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, Callable

from heddle import _heddle
from heddle.errors import ConfigError, HeddleError

USAGE = """\
usage: heddle run [--config FILE] [-n N] [--init-timeout S] [--transport auto|shm|tcp]
                  [--master-bind ADDR] [--kill-grace S] [--restarts N]
                  [--heartbeat-interval S] [--heartbeat-timeout S]
                  [--checkpoint-interval S] [--checkpoint-dir DIR]
                  [--alignment-timeout S|off] [--launcher local|mpirun|slurm]
                  [--launcher-args ARGS] [--allocate salloc|sbatch]
                  [--security tls|mac|none] [--dashboard ADDR|off]
                  [--progress auto|never] [--log-format text|json]
                  [--cpus-per-worker CORES] [--memory-per-worker AMOUNT]
                  [--mpi4py] [--] PROGRAM [ARGS...]

Run PROGRAM as N workers on this machine, or through mpirun or Slurm. A PROGRAM ending
in .py (or -m MODULE, -c CODE) runs under this Python interpreter.

options:
  --config FILE        a TOML file of defaults for these options, HEDDLE_* settings
                       ([settings]) and the tasks' default contract ([resources]); the
                       command line wins (also HEDDLE_CONFIG)
  -n, --workers N      number of workers (default 1)
  --init-timeout S     seconds workers have to join before the job fails (default 60)
  --transport T        transport between workers on this host: auto, shm or tcp
                       (sets HEDDLE_TRANSPORT)
  --master-bind ADDR   address the job master listens on (default loopback, or with a
                       launcher whose workers span hosts this host's first address)
  --kill-grace S       seconds between SIGTERM and SIGKILL when stopping workers (default 2)
  --restarts N         start a failed job again, every worker with its old rank, up to N
                       times (default 0); workers see HEDDLE_ATTEMPT = 0, 1, ...
  --heartbeat-interval S
                       seconds between heartbeats of master and workers (default 1, or
                       HEDDLE_HEARTBEAT_S)
  --heartbeat-timeout S
                       silence after which a worker is declared failed and killed
                       (default 5, or HEDDLE_HEARTBEAT_TIMEOUT_S)
  --checkpoint-interval S
                       streams of the workers' data sessions checkpoint every S seconds
                       and resume from their last checkpoint after a restart, exactly once
                       (sets HEDDLE_CHECKPOINT_INTERVAL_S)
  --checkpoint-dir DIR where those checkpoints go (sets HEDDLE_CHECKPOINT_DIR; default a
                       private directory per job in the temp directory)
  --alignment-timeout S
                       seconds a checkpoint aligns its barriers before it goes on
                       unaligned, storing the records in flight (default 0.005; off: always
                       aligned; sets HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S)
  --cpus-per-worker CORES
                       cores each worker offers to task placement (e.g. 0.5) instead of
                       its share of the host's (sets HEDDLE_CPUS_PER_WORKER)
  --memory-per-worker AMOUNT
                       memory each worker offers (e.g. 4GiB) instead of its share of the
                       host's (sets HEDDLE_MEMORY_PER_WORKER)
  --launcher L         who starts the workers: local (default), mpirun (Open MPI) or
                       slurm (srun)
  --launcher-args ARGS arguments for mpirun, srun, salloc or sbatch, before the program
                       (one string, split at spaces: --launcher-args "--oversubscribe")
  --allocate A         with --launcher slurm: salloc, or sbatch --wait, around srun
  --security S         what protects the job's TCP connections: tls, mac or none
                       (default: TLS between hosts, plaintext on loopback)
  --dashboard ADDR     where the live web dashboard and /metrics are served, HOST:PORT
                       (default 127.0.0.1:0: a free port on loopback, printed) or off
  --progress P         a progress bar of the running stage on a terminal: auto (when
                       stderr is one) or never
  --mpi4py             programs written for mpi4py run unchanged: `from mpi4py import
                       MPI` in the workers loads heddle.MPI (this job only)
  --log-format F       how workers write their logs (levels from HEDDLE_LOG): text or json
                       (sets HEDDLE_LOG_FORMAT)
  -h, --help           show this help

Each worker gets HEDDLE_RANK, HEDDLE_WORLD_SIZE, HEDDLE_MASTER and HEDDLE_JOB_TOKEN; its
output is prefixed with [rank]. If a worker fails, the others are stopped and heddle run
exits with that worker's status; Ctrl-C stops everything.
"""

TOP_USAGE = """\
usage: heddle <command> ...

Heddle: MPI-class collectives and big-data dataflow in one runtime.

commands:
  run      run PROGRAM as N workers on this machine: heddle run -n 4 script.py
  bench    benchmarks (part of the Rust command: cargo run --release -p heddle-cli -- bench ...)

options:
  -h, --help      show this help
  -V, --version   print the version
"""

_VALUE_OPTIONS = {
    "--config": "config",
    "-n": "workers",
    "--workers": "workers",
    "--init-timeout": "init_timeout",
    "--transport": "transport",
    "--master-bind": "master_bind",
    "--kill-grace": "kill_grace",
    "--restarts": "restarts",
    "--heartbeat-interval": "heartbeat_interval",
    "--heartbeat-timeout": "heartbeat_timeout",
    "--checkpoint-interval": "checkpoint_interval",
    "--checkpoint-dir": "checkpoint_dir",
    "--alignment-timeout": "alignment_timeout",
    "--launcher": "launcher",
    "--launcher-args": "launcher_args",
    "--allocate": "allocate",
    "--security": "security",
    "--dashboard": "dashboard",
    "--progress": "progress",
    "--log-format": "log_format",
    "--cpus-per-worker": "cpus_per_worker",
    "--memory-per-worker": "memory_per_worker",
}


class _UsageError(Exception):
    pass


def _parse_run(args: Sequence[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "config": None,
        "workers": "1",
        "init_timeout": "60",
        "transport": None,
        "master_bind": None,
        "kill_grace": "2",
        "restarts": "0",
        "heartbeat_interval": None,
        "heartbeat_timeout": None,
        "checkpoint_interval": None,
        "checkpoint_dir": None,
        "alignment_timeout": None,
        "launcher": "local",
        "launcher_args": None,
        "allocate": None,
        "security": None,
        "dashboard": "127.0.0.1:0",
        "progress": "auto",
        "log_format": None,
        "cpus_per_worker": None,
        "memory_per_worker": None,
    }
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            opts["help"] = True
            return opts
        if a == "--mpi4py":
            opts["mpi4py"] = True
            i += 1
            continue
        name, value = a, None
        if a.startswith("--") and "=" in a:
            name, value = a.split("=", 1)
        elif a.startswith("-n") and len(a) > 2 and not a.startswith("--"):
            name, value = "-n", a[2:]
        if name in _VALUE_OPTIONS:
            if value is None:
                if i + 1 >= len(args):
                    raise _UsageError(f"{name} needs a value")
                value = args[i + 1]
                i += 1
            opts[_VALUE_OPTIONS[name]] = value
            i += 1
            continue
        if a.startswith("--"):
            raise _UsageError(f"unknown option {a}")
        break  # the program starts here (including python's own -m / -c)
    opts["command"] = list(args[i:])
    return opts


def _isolation(value: str) -> str:
    if value not in ("auto", "thread", "process"):
        raise ValueError(f"isolation {value!r}: use auto, thread or process")
    return value


def _with_config_file(opts: dict[str, Any], args: Sequence[str]) -> dict[str, Any]:
    """``opts`` with the config file's options under the command line's, and its settings
    put in this process's environment (inherited by the workers) where not already set."""
    path = opts["config"] or os.environ.get("HEDDLE_CONFIG") or None
    if path is None or opts.get("help"):
        return opts
    try:
        file_args, settings = _heddle.read_config(path)
    except ConfigError as e:
        raise _UsageError(str(e)) from None
    checks: dict[str, tuple[str, Callable[[str], Any]]] = {
        "HEDDLE_TASK_CPUS": ("cpus", _heddle.task.parse_cpus),
        "HEDDLE_TASK_MEMORY": ("memory", _heddle.task.parse_bytes),
        "HEDDLE_TASK_IO_BYTES_PER_S": ("io_bytes_per_s", _heddle.task.parse_bytes),
        "HEDDLE_TASK_NET_BYTES_PER_S": ("net_bytes_per_s", _heddle.task.parse_bytes),
        "HEDDLE_TASK_ISOLATION": ("isolation", _isolation),
    }
    for name, value in settings:
        if name in checks:
            key, check = checks[name]
            try:
                check(value)
            except ValueError as e:
                raise _UsageError(f"{path}: [resources] {key} = {value!r}: {e}") from None
    for name, value in settings:
        os.environ.setdefault(name, value)
    return _parse_run(list(file_args) + list(args))


def _number(text: str, flag: str, kind: Callable[[str], Any] = float) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise _UsageError(
            f"{flag} {text!r} is not a {'whole number' if kind is int else 'number'}"
        ) from None


def _checkpoint_env(interval: str | None, directory: str | None) -> list[tuple[str, str]]:
    """``HEDDLE_CHECKPOINT_INTERVAL_S`` and ``HEDDLE_CHECKPOINT_DIR`` for the workers, from
    ``--checkpoint-interval`` (checked against the setting's range) and ``--checkpoint-dir``."""
    env = []
    if interval is not None:
        _number(interval, "--checkpoint-interval")
        try:
            _heddle.check_setting("HEDDLE_CHECKPOINT_INTERVAL_S", interval)
        except ConfigError as e:
            raise _UsageError(f"--checkpoint-interval {interval}: {e}") from None
        env.append(("HEDDLE_CHECKPOINT_INTERVAL_S", interval))
    if directory is not None:
        if not directory.strip():
            raise _UsageError("--checkpoint-dir needs a directory, got an empty name")
        if interval is None and not os.environ.get("HEDDLE_CHECKPOINT_INTERVAL_S"):
            raise _UsageError(
                "--checkpoint-dir needs --checkpoint-interval S (or HEDDLE_CHECKPOINT_INTERVAL_S): "
                "streams checkpoint only when an interval is set"
            )
        env.append(("HEDDLE_CHECKPOINT_DIR", os.path.abspath(directory)))
    return env


def _alignment_env(timeout: str | None) -> list[tuple[str, str]]:
    """``HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S`` from ``--alignment-timeout`` (seconds, at
    least 0, or ``off``)."""
    if timeout is None:
        return []
    if timeout.strip().lower() != "off" and _number(timeout, "--alignment-timeout") < 0:
        raise _UsageError(f"--alignment-timeout {timeout} must be 0 or more seconds, or off")
    return [("HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S", timeout)]


def _offer_env(cpus: str | None, memory: str | None) -> list[tuple[str, str]]:
    """``HEDDLE_CPUS_PER_WORKER`` and ``HEDDLE_MEMORY_PER_WORKER`` from
    ``--cpus-per-worker`` and ``--memory-per-worker``, checked as the workers read them."""
    env = []
    for flag, var, value, parse in (
        ("--cpus-per-worker", "HEDDLE_CPUS_PER_WORKER", cpus, _heddle.task.parse_cpus),
        ("--memory-per-worker", "HEDDLE_MEMORY_PER_WORKER", memory, _heddle.task.parse_bytes),
    ):
        if value is not None:
            try:
                parse(value)
            except ValueError as e:
                raise _UsageError(f"{flag}: {e}") from None
            env.append((var, value))
    return env


def _program(command: list[str]) -> list[str]:
    if command and (command[0].endswith(".py") or command[0] in ("-m", "-c")):
        return [sys.executable, *command]
    return command


def run(args: Sequence[str]) -> int:
    """``heddle run ARGS``: launches the job and returns the exit code."""
    try:
        opts = _parse_run(args)
        opts = _with_config_file(opts, args)
        if opts.get("help"):
            print(USAGE, end="")
            return 0
        if not opts["command"]:
            raise _UsageError("no program given: heddle run -n N PROGRAM ARGS...")
        workers = _number(opts["workers"], "-n", int)
        init_timeout = _number(opts["init_timeout"], "--init-timeout")
        kill_grace = _number(opts["kill_grace"], "--kill-grace")
        restarts = _number(opts["restarts"], "--restarts", int)
        if restarts < 0:
            raise _UsageError(f"--restarts {restarts} must be 0 or more")
        beats = {
            name: _number(opts[name], "--" + name.replace("_", "-"))
            for name in ("heartbeat_interval", "heartbeat_timeout")
            if opts[name] is not None
        }
        checkpoints = _checkpoint_env(opts["checkpoint_interval"], opts["checkpoint_dir"])
        checkpoints += _alignment_env(opts["alignment_timeout"])
        checkpoints += _offer_env(opts["cpus_per_worker"], opts["memory_per_worker"])
    except _UsageError as e:
        print(f"heddle run: {e}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    env = list(checkpoints)
    if opts["transport"] is not None:
        env.append(("HEDDLE_TRANSPORT", opts["transport"]))
    if opts["security"] is not None:
        env.append(("HEDDLE_SECURITY", opts["security"]))
    if opts["log_format"] is not None:
        env.append(("HEDDLE_LOG_FORMAT", opts["log_format"]))
    if "PYTHONUNBUFFERED" not in os.environ:
        # Worker output goes through pipes: unbuffered, lines appear as they are printed.
        env.append(("PYTHONUNBUFFERED", "1"))
    # Numeric libraries (numpy's BLAS, OpenMP) would each start a thread per core in every
    # worker and the workers would fight over the cores: give each worker its share, as
    # Ray and Dask do, unless the user chose.
    threads = str(max(1, (os.cpu_count() or 1) // max(1, workers)))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if var not in os.environ:
            env.append((var, threads))
    sys.stdout.flush()
    try:
        return _heddle.run_job(
            workers,
            _program(opts["command"]),
            env,
            init_timeout=init_timeout,
            master_bind=opts["master_bind"],
            kill_grace=kill_grace,
            restarts=restarts,
            launcher=opts["launcher"],
            launcher_args=(opts["launcher_args"] or "").split(),
            allocate=opts["allocate"],
            dashboard=opts["dashboard"],
            progress=opts["progress"],
            mpi4py=opts.get("mpi4py", False),
            **beats,
        )
    except ConfigError as e:
        print(f"heddle run: {e}", file=sys.stderr)
        return 2
    except HeddleError as e:
        print(f"heddle run: {e}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``heddle`` console command; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(TOP_USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"heddle {_heddle.__version__}")
        return 0
    if args[0] == "run":
        return run(args[1:])
    if args[0] == "bench":
        print(
            "heddle bench: the benchmarks need the source tree; run them with the Rust command:\n"
            "  cargo run --release -p heddle-cli -- bench collectives --vs mpi\n"
            "  (Python: see benches/python/bench_allreduce.py)",
            file=sys.stderr,
        )
        return 2
    print(f"heddle: unknown command {args[0]!r}\n\n{TOP_USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
