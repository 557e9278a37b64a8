"""Heddle bridge SDK for Python: write a filter (DataCutter's init / process / finalize)
that runs as a task of a Heddle job, speaking spec/bridge.md over pipes, FIFOs, TCP or Unix
sockets. Pure Python, no Rust needed.

    import heddle_bridge as hb

    class Upper(hb.Filter):
        def process(self, record, emit):
            emit(record.text.upper())

    if __name__ == "__main__":
        hb.run(Upper())
"""

from .record import Record
from .session import Filter, Session, run
from .wire import PROTOCOL_VERSION, ProtocolError

__all__ = ["Filter", "PROTOCOL_VERSION", "ProtocolError", "Record", "Session", "run"]
__version__ = "0.1.0"
