"""How the native engines read a file of lines as one string column, unsplit and unquoted:
the field delimiter and the quote are control characters the benchmark's data never holds
(0x1f, and 0x1e or none), so every line arrives whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def polars_options(pl: Any) -> dict[str, Any]:
    """Arguments of ``pl.read_csv`` / ``pl.scan_csv`` for a column ``line``."""
    return {
        "has_header": False,
        "new_columns": ["line"],
        "separator": "\x1f",
        "quote_char": None,
        "schema": {"line": pl.String},
    }


def datafusion_context(workers: int) -> Any:
    """A DataFusion session of ``workers`` target partitions."""
    from datafusion import SessionConfig, SessionContext

    return SessionContext(SessionConfig().with_target_partitions(workers))


def register_datafusion_lines(ctx: Any, path: str) -> None:
    """Registers ``path`` in ``ctx`` as table ``lines`` with one string column ``line``."""
    import pyarrow as pa
    from datafusion import CsvReadOptions

    options = CsvReadOptions(
        has_header=False,
        delimiter="\x1f",
        quote="\x1e",
        schema=pa.schema([("line", pa.string())]),
        file_extension=Path(path).suffix,
    )
    ctx.register_csv("lines", path, options=options)
