"""Bad arguments raise heddle.ArgumentError before any communication, on every rank, and
the communicator keeps working."""

import json

import numpy as np

import heddle

comm = heddle.init()
r, p = comm.rank, comm.size
caught = []


def expect(fn, *needles):
    try:
        fn()
    except heddle.ArgumentError as e:
        text = str(e)
        for needle in needles:
            assert needle in text, (needle, text)
        caught.append(text)
        return
    raise AssertionError(f"no ArgumentError from {fn}")


x = np.zeros(4)
expect(lambda: comm.Bcast(x, root=p), f"root {p} is outside")
expect(lambda: comm.Reduce(x, np.zeros(4), root=-1), "root -1 is outside")
expect(lambda: comm.Send(x, dest=p), f"dest {p} is outside")
expect(lambda: comm.Recv(x, source=0, tag=-1), "tag -1")
expect(lambda: comm.Allreduce(np.zeros(4, dtype=np.float32), x), "different element types")
expect(lambda: comm.Allreduce(np.zeros(3), x), "must hold 4 elements")
expect(lambda: comm.Allreduce(heddle.IN_PLACE, np.zeros(4, dtype=bool), op=heddle.SUM), "bool")
expect(lambda: comm.Allreduce(heddle.IN_PLACE, x, op="sum"), "op must be one of")
expect(lambda: comm.Allreduce(heddle.IN_PLACE, np.zeros(4, dtype=np.complex128)), "reductions need")
expect(lambda: comm.Allreduce(heddle.IN_PLACE, [1.0, 2.0]), "must be a buffer", "list")
expect(lambda: comm.Allreduce(heddle.IN_PLACE, np.zeros(8)[::2]), "contiguous")
ro = np.zeros(4)
ro.flags.writeable = False
expect(lambda: comm.Allreduce(heddle.IN_PLACE, ro), "writable")
expect(lambda: comm.Allgather(np.zeros(2), np.zeros(2 * p + 1)), "one sendbuf per rank")
expect(lambda: comm.Allgatherv(np.zeros(2), np.zeros(2 * p)), "[buffer, counts]")
expect(lambda: comm.scatter([1] * (p + 1), root=r), "one per rank")
expect(lambda: comm.recv(source=None), "ANY_SOURCE")
# Still usable: every rank raised locally, nobody is left half-way through a collective.
y = np.array([r], dtype=np.int64)
comm.Allreduce(heddle.IN_PLACE, y)
assert y[0] == p * (p - 1) // 2
print(json.dumps({"rank": r, "ok": True, "caught": len(caught)}))
