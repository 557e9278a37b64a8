# Heddle build, demo and test entry points. `make demo` and `make test` are all a fresh
# machine needs (Rust via rustup and python3 are on it; nothing else is installed by hand).

CARGO ?= cargo
JOBS ?= 2
RELEASE := target/release

.PHONY: all build demo test test-rust test-spec bench fuzz clean

all: build

## Build the `heddle` binary and every example (release).
build:
	$(CARGO) build -j$(JOBS) --release --bins --examples

## Build everything and run the collectives demo on 4 local workers.
demo: build
	$(RELEASE)/heddle run -n 4 -- $(RELEASE)/examples/collectives

## Build and run every test suite.
test: test-rust test-spec

test-rust:
	$(CARGO) build -j$(JOBS) --release --bins --examples
	$(CARGO) test -j$(JOBS) --release --workspace

## The golden vectors still match their independent Python generator.
test-spec:
	python3 spec/vectors/generate.py --check

## Heddle vs Open MPI (mpi4py), installed on demand into benches/.venv-mpi.
bench: build
	$(RELEASE)/heddle bench collectives --vs mpi

## Coverage-guided fuzzing of the wire decoder (SECONDS=600 by default).
fuzz:
	fuzz/run.sh $(or $(SECONDS),600)

clean:
	$(CARGO) clean
