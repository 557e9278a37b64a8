"""A filter that emits many results per record (``init``'s argument, default 10), so it
runs out of credit again and again — and past the host's COMPLETE (F3)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import heddle_bridge as hb


class Fanout(hb.Filter):
    def init(self, args: list[str], context: dict[str, Any]) -> None:
        self.k = int(args[0]) if args else 10

    def process(self, record: hb.Record, emit: Callable[..., None]) -> None:
        for i in range(self.k):
            emit(f"{record.text}.{i}")


if __name__ == "__main__":
    hb.run(Fanout())
