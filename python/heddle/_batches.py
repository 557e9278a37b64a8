"""Batches of records for ``map_batches`` (data sets and streams): records to numpy arrays,
dicts of column arrays, Arrow record batches or lists, and what a batch function returns
back to records."""

from __future__ import annotations

from typing import Any, Callable


def _numpy() -> Any:
    import numpy

    return numpy


def _to_numpy(records: list[Any]) -> Any:
    np = _numpy()
    if records and isinstance(records[0], dict):
        return {k: np.asarray([r[k] for r in records]) for k in records[0]}
    return np.asarray(records)


def _to_arrow(records: list[Any]) -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise ImportError("batch_format='pyarrow' needs pyarrow (pip install pyarrow)") from None
    if records and isinstance(records[0], dict):
        return pa.RecordBatch.from_pylist(records)
    return pa.RecordBatch.from_pydict({"value": records})


_TO_BATCH: dict[str, Callable[[list[Any]], Any]] = {
    "numpy": _to_numpy,
    "pyarrow": _to_arrow,
    "list": list,
}


def to_batch(batch_format: str) -> Callable[[list[Any]], Any]:
    """The function that makes a batch of ``batch_format`` from a list of records."""
    try:
        return _TO_BATCH[batch_format]
    except KeyError:
        raise ValueError(
            f"batch_format must be 'numpy', 'pyarrow' or 'list', not {batch_format!r}"
        ) from None


def from_batch(out: Any) -> list[Any]:
    """The records of what a map_batches function returned."""
    if out is None:
        return []
    if isinstance(out, list):
        return out
    mod = type(out).__module__
    records: list[Any]
    if mod.startswith("numpy"):
        if out.ndim == 0:
            return [out.item()]
        if out.ndim == 1:
            records = out.tolist()
            return records
        return [tuple(r) for r in out.tolist()]
    if mod.startswith("pyarrow"):
        names = list(out.schema.names)
        records = out.column(0).to_pylist() if names == ["value"] else out.to_pylist()
        return records
    if isinstance(out, dict):
        cols = list(out)
        values = [from_batch(out[c]) for c in cols]
        return [dict(zip(cols, row)) for row in zip(*values)]
    return list(out)
