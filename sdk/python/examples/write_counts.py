"""A bridged filter in Python: writes each keyed count it receives as a ``word count`` line
into ``DIR/part-NNNNN`` (its instance number), written to a temporary name and renamed when
the input ends, so a failed job leaves no half-written part. It emits the number of lines it
wrote. Part of the mixed-language pipeline (examples/bridges). ``init`` takes DIR."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import heddle_bridge as hb


class WriteCounts(hb.Filter):
    def init(self, args: list[str], context: dict[str, Any]) -> None:
        if not args:
            raise ValueError("write_counts needs the output directory as its argument")
        self.dir = Path(args[0])
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"part-{int(context['instance']):05d}"
        self.final = self.dir / name
        self.tmp = self.dir / f".{name}.tmp-{os.getpid()}"
        self.out = open(self.tmp, "w", encoding="utf-8")
        self.lines = 0

    def process(self, record: hb.Record, emit: Callable[..., None]) -> None:
        (count,) = record.values()
        self.out.write(f"{bytes(record.key).decode()} {count}\n")
        self.lines += 1

    def finalize(self, emit: Callable[..., None]) -> None:
        self.out.close()
        os.replace(self.tmp, self.final)
        emit(str(self.lines))


if __name__ == "__main__":
    hb.run(WriteCounts())
