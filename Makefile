# Heddle build, demo and test entry points. `make demo` and `make test` are all a fresh
# machine needs (Rust via rustup and python3 are on it; nothing else is installed by hand).

CARGO ?= cargo
JOBS ?= 2
RELEASE := target/release

.PHONY: all build build-deps demo test lint lint-rust test-rust test-deps test-spec test-python test-fuzz python-install bench bench-python fuzz clean
.PHONY: bench-compare bench-compare-quick bench-observability mpi4py-reference sdk-test sdk-test-python sdk-test-c sdk-test-cpp sdk-test-go sdk-test-java sdk-deps heddle-bin bridge-toolchains

all: build

## Build the `heddle` binary and every example (release).
build: build-deps
	$(CARGO) build -j$(JOBS) --release --bins --examples

## System packages the build needs: the examples carry the MPI transport (the `heddle`
## crate's default `mpi` feature), built against Open MPI (libopenmpi-dev) through bindgen
## (libclang-dev).
build-deps:
	@dpkg -s libopenmpi-dev libclang-dev >/dev/null 2>&1 || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends libopenmpi-dev openmpi-bin libclang-dev; }

## Build everything and run the demos, each printing a verified JSON summary:
## collectives, then word count (200 MB of generated text) and K-means (1 M points)
## through the data API on 4 local workers, and through the task API on 2.
demo: build
	$(RELEASE)/heddle run -n 4 -- $(RELEASE)/examples/collectives
	$(RELEASE)/heddle run -n 4 -- $(RELEASE)/examples/wordcount --generate --seed 1
	$(RELEASE)/heddle run -n 4 -- $(RELEASE)/examples/kmeans --generate --seed 1
	$(RELEASE)/heddle run -n 2 -- $(RELEASE)/examples/wordcount_task --generate --seed 1
	$(RELEASE)/heddle run -n 2 -- $(RELEASE)/examples/kmeans_task --generate --seed 1

## Build and run every test suite, after the linters.
test: lint test-rust test-spec test-fuzz test-python sdk-test

## Every linter: Rust (fmt, clippy, rustdoc) and Python (ruff, mypy, stubtest).
lint: lint-rust lint-python

## cargo fmt --check; clippy on every target with warnings as errors; rustdoc with warnings
## as errors (the libraries; the extension module's items are documented in its .pyi).
lint-rust: build-deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy -j$(JOBS) --release --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -j$(JOBS) --no-deps --workspace --lib --exclude heddle-python

test-rust: test-deps
	$(CARGO) build -j$(JOBS) --release --bins --examples
	$(CARGO) test -j$(JOBS) --release --workspace
	@echo "== the task and data suites again, on 2 executor threads per worker"
	HEDDLE_TASK_THREADS=2 $(CARGO) test -j$(JOBS) --release -p heddle-task -p heddle-data --tests

## System packages the tests run against: redis-server (Redis Streams source and sink),
## Open MPI's mpirun (jobs started by another launcher), headless Chromium and its driver
## (the dashboard's browser test).
test-deps: build-deps
	@command -v redis-server >/dev/null && command -v mpirun >/dev/null \
	  && command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends redis-server openmpi-bin chromium chromium-driver; }

## The golden vectors (wire format and bridge protocol) still match their independent
## Python generators.
test-spec:
	python3 spec/vectors/generate.py --check
	python3 spec/bridge/generate.py --check

## Every bridge SDK's own tests, in its ecosystem's runner (each also replays the vectors in
## spec/bridge/); the Rust host's conformance suite against them is in `cargo test`.
sdk-test: sdk-test-python sdk-test-c sdk-test-cpp sdk-test-go sdk-test-java

## Toolchains and libraries of the SDKs, from Debian's packages when missing: CMake and
## pkg-config with cJSON (C, C++), GoogleTest (C++).
sdk-deps:
	@command -v cmake >/dev/null && command -v pkg-config >/dev/null \
	  && dpkg -s libcjson-dev libgtest-dev >/dev/null 2>&1 || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends cmake pkg-config libcjson-dev libgtest-dev g++; }

## What the bridged filters of the examples (examples/bridges/build.sh) are built with: the
## SDKs' packages, a Go toolchain, a JDK and Maven (from Debian's packages when missing).
bridge-toolchains: sdk-deps
	@command -v $(GO) >/dev/null && command -v mvn >/dev/null && command -v javac >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends golang-go default-jdk-headless maven; }

## The heddle binary that drives every SDK's conformance suite.
HEDDLE_BIN := $(abspath $(RELEASE)/heddle)
heddle-bin:
	$(CARGO) build -j$(JOBS) --release -p heddle-cli

## The C SDK (sdk/c): CMake, then ctest (the vectors, and the conformance suite).
sdk-test-c: sdk-deps heddle-bin
	cmake -S sdk/c -B sdk/c/build -DCMAKE_BUILD_TYPE=Release -DHEDDLE_BIN=$(HEDDLE_BIN) >/dev/null
	cmake --build sdk/c/build -j$(JOBS)
	cd sdk/c/build && ctest --output-on-failure

## The C++ SDK (sdk/cpp, header-only over the C SDK): GoogleTest under ctest, and the
## conformance suite.
sdk-test-cpp: sdk-deps heddle-bin
	cmake -S sdk/cpp -B sdk/cpp/build -DCMAKE_BUILD_TYPE=Release -DHEDDLE_BIN=$(HEDDLE_BIN) >/dev/null
	cmake --build sdk/cpp/build -j$(JOBS)
	cd sdk/cpp/build && ctest --output-on-failure

## The Go SDK (sdk/go, a module using only the standard library): go vet, go test (the
## vectors, and the conformance suite through HEDDLE_BIN). Installs Debian's golang-go if
## the machine has no go.
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
sdk-test-go: heddle-bin
	@command -v $(GO) >/dev/null || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q golang-go; }
	cd sdk/go && test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	cd sdk/go && $(GO) vet ./... && HEDDLE_BIN=$(HEDDLE_BIN) $(GO) test -count=1 ./...

## The Java SDK (sdk/java): Maven, JUnit through Surefire (the vectors, and the conformance
## suite); plugins and libraries pinned in its pom.xml come from Maven Central. Installs
## Debian's JDK and Maven if missing.
sdk-test-java: heddle-bin
	@command -v mvn >/dev/null && command -v javac >/dev/null || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends default-jdk-headless maven; }
	cd sdk/java && mvn -q -B test -Dheddle.bin=$(HEDDLE_BIN)

## The pure-Python SDK (sdk/python) under pytest, from the test virtualenv.
sdk-test-python: heddle-bin
	@test -x $(PY) || $(PYTHON) -m venv $(PY_VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt
	cd sdk/python && ../../$(PY) -m pytest -q
	$(HEDDLE_BIN) bridge conformance --transports pipe,fifo,tcp,unix,shm -- $(PYTHON) sdk/python/tests/reference_filter.py

## The Python package (pip install . = maturin build) in the virtualenv .venv-py, with the
## test requirements from PyPI; installs python3-venv with apt-get if python3 lacks venv.
PYTHON ?= python3
PY_VENV ?= .venv-py
PY := $(PY_VENV)/bin/python
python-install:
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv; }
	@test -x $(PY) || $(PYTHON) -m venv $(PY_VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt
	CARGO_BUILD_JOBS=$(JOBS) $(PY) -m pip install -q --disable-pip-version-check .

## pytest: the Python API in a world of one and in jobs of 2, 3 and 4 workers. The real
## mpi4py on Open MPI (benches/.venv-mpi) is the reference of test_mpi4py_compat.py.
test-python: test-deps python-install mpi4py-reference bridge-toolchains
	$(PY) -m pytest -q tests/python

## The real mpi4py, built against the system's Open MPI, in benches/.venv-mpi (idempotent).
mpi4py-reference:
	benches/mpi/setup.sh >/dev/null

## Python lint (ruff and mypy pinned in tests/python/requirements.txt): ruff's rules and its
## formatting on the package, tests, examples and benchmarks; `mypy --strict` on the package;
## stubtest of the stub package python/heddle/_heddle/ against the extension module installed
## in .venv-py: stubtest walks the package, so it checks heddle._heddle and each submodule
## stub (comm, task, data: "checked 4 modules"); naming them too would load them twice. A
## runtime submodule with no stub fails it (the module's __all__ lists its submodules).
PY_LINT_PATHS := python/heddle tests/python examples/python benches sdk/python
.PHONY: lint-python
lint-python: python-install
	$(PY) -m ruff check $(PY_LINT_PATHS)
	$(PY) -m ruff format --check $(PY_LINT_PATHS)
	$(PY) -m mypy --strict python/heddle
	$(PY) -m mypy --strict sdk/python/heddle_bridge
	MYPYPATH=python $(PY) -m mypy.stubtest heddle._heddle

## heddle.comm Allreduce (8 B, 2 ranks) against mpi4py in the same run, with the ratio.
bench-python: python-install
	$(PY) benches/python/bench_allreduce.py

## What the dashboard's metrics cost on word count: instructions under callgrind (checked:
## under 1 %) and time, HEDDLE_METRICS on against off (docs/observability.md, "Cost").
bench-observability: build
	$(PYTHON) benches/observability/overhead.py

## Heddle vs Open MPI (mpi4py), installed on demand into benches/.venv-mpi.
bench: build
	$(RELEASE)/heddle bench collectives --vs mpi

## Side by side with Open MPI, Spark, Dask, Ray and Flink (benches/compare; peers installed on
## demand into benches/.venv-*): every workload on every system, 3 repeats, docs/benchmarks.md.
## Heddle's Python rows need .venv-py (python-install); without it they are reported as missing.
bench-compare: build
	@$(MAKE) --no-print-directory python-install || echo "bench-compare: python-install failed; Heddle's Python rows will be skipped"
	$(PYTHON) benches/compare/run.py --repeat 3

## The same on small data, once: a smoke test (under 5 minutes once the peers are installed).
bench-compare-quick: build
	@$(MAKE) --no-print-directory python-install || echo "bench-compare-quick: python-install failed; Heddle's Python rows will be skipped"
	$(PYTHON) benches/compare/run.py --quick --repeat 1

## Coverage-guided fuzzing of every decoder of untrusted bytes (SECONDS=600 each by default).
fuzz:
	fuzz/run.sh $(or $(SECONDS),600)

## A short fuzzing run of every target (the same targets as `make fuzz`), part of `make test`:
## any crash fails it. FUZZ_CLEAN=1 (set by .ci/run) removes the fuzz build afterwards, to
## leave the disk to the suites that follow.
FUZZ_SECONDS ?= 15
test-fuzz:
	CARGO_BUILD_JOBS=$(JOBS) fuzz/run.sh $(FUZZ_SECONDS)
	$(if $(FUZZ_CLEAN),rm -rf fuzz/target)

clean:
	$(CARGO) clean
