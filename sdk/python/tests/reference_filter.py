"""The reference filter of spec/bridge.md §9, used by the vectors and the conformance suite."""

from __future__ import annotations

import array
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import heddle_bridge as hb
from heddle_bridge import wire


class Reference(hb.Filter):
    def init(self, args, context):
        self.prefix = args[0] if args else ""
        self.count = 0
        self.fail_at = int(args[1]) if len(args) > 1 else -1

    def process(self, record, emit):
        if self.count == self.fail_at:
            raise ValueError(f"asked to fail at record {self.count}")
        self.count += 1
        if record.codec == wire.UTF8:
            text = bytes(record.payload).decode()
            up = "".join(c.upper() if "a" <= c <= "z" else c for c in text)
            emit(hb.Record(up.encode(), wire.UTF8, record.key))
        elif record.dtype == "f64":
            emit(
                hb.Record(
                    array.array("d", [sum(record.values())]).tobytes(),
                    wire.ARRAY_BASE + 9,
                    record.key,
                )
            )
        else:
            emit(hb.Record(record.payload, record.codec, record.key))

    def finalize(self, emit):
        emit(f"{self.prefix}{self.count}")


if __name__ == "__main__":
    hb.run(Reference())
