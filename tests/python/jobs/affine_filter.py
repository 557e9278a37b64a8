"""A bridged filter (pure Python, the bridge SDK in sdk/python) for ``bridge_restart.py``:
each record is an integer as text, replaced by ``(7x + 3) mod 1_000_003``.

It crashes on purpose (exit status 3, after a line on its standard error) in the job's
first attempt (``HEDDLE_ATTEMPT=0``), on the last rank (``HEDDLE_RANK`` = ``args[1]``),
in step ``args[2]`` of the iteration (``args[0]``), at its third record.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sdk" / "python"))

import heddle_bridge as hb


class Affine(hb.Filter):
    def init(self, args, context):
        step, last_rank, crash_step = args
        self.crash = (
            os.environ.get("HEDDLE_ATTEMPT") == "0"
            and os.environ.get("HEDDLE_RANK") == last_rank
            and step == crash_step
        )
        self.seen = 0

    def process(self, record, emit):
        self.seen += 1
        if self.crash and self.seen == 3:
            print("affine_filter: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        emit(str((int(record.text) * 7 + 3) % 1_000_003))


if __name__ == "__main__":
    hb.run(Affine())
