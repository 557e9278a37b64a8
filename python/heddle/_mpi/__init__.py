"""The parts of :mod:`heddle.MPI` (mpi4py's API on Heddle): errors, datatypes, operators,
requests, groups, and the communicators with their point-to-point and collective calls."""
