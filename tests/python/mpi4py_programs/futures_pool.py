"""mpi4py.futures' MPIPoolExecutor under `python -m mpi4py.futures`: only rank 0 runs the
main block; the other ranks serve its tasks."""

from mpi4py.futures import MPIPoolExecutor


def power(base, exponent):
    return base**exponent


if __name__ == "__main__":
    with MPIPoolExecutor() as executor:
        print("starmap", list(executor.starmap(power, [(2, 5), (3, 3), (10, 2)])))
        print("map", sum(executor.map(power, range(100), [2] * 100, chunksize=10)))
