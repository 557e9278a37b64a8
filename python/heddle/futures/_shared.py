"""Large task results cross to the root without copies when both are on one host, as
Ray's object store does: the worker writes each buffer of at least ``SHARE_MIN`` bytes
(numpy arrays' data, pickle protocol 5's out-of-band buffers) once into a file of the
job's private directory (``HEDDLE_JOB_DIR``, mode 0700, removed with the job however it
ends); the root maps the file copy-on-write, removes its name at once, and the array it
unpickles is a view of those pages. Elsewhere, or without a job directory, results travel
in the message as before.

A results message holding shared buffers is ``("shared", files, stream, inline)``: the
pickle stream, its out-of-band buffers in order — a ``(name, bytes)`` file or ``None`` for
the next of ``inline`` (buffers that travel in the message) — and those inline buffers.
Without shared buffers the message is the plain pickled results, pickled once. The root
accepts only regular files of its own user, mode 0600, directly inside its own job
directory.
"""

from __future__ import annotations

import itertools
import mmap
import os
import pickle
import secrets
import stat
from typing import Any

from heddle._heddle import comm as _comm
from heddle.comm import _OUT_OF_BAND_MIN, _pack_all, _unpack_all

#: Buffers from this size on go through a shared file (smaller ones are copied into the
#: message: a file costs a few system calls).
SHARE_MIN = 1 << 20

_names = itertools.count()


def job_dir() -> str | None:
    """The job's private directory, if this process has one."""
    path = os.environ.get("HEDDLE_JOB_DIR")
    return path if path and os.path.isdir(path) else None


def _export(raw: memoryview, directory: str) -> tuple[str, int]:
    name = f"result-{os.getpid()}-{next(_names)}-{secrets.token_hex(4)}"
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = raw.cast("B")
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return name, raw.nbytes


def dump_shared(obj: Any, directory: str) -> bytearray:
    """``obj`` pickled with its large buffers written to files in ``directory``."""
    files: list[tuple[str, int] | None] = []
    inline: list[memoryview] = []

    def out_of_band(pb: pickle.PickleBuffer) -> bool:
        try:
            raw = pb.raw()
        except BufferError:  # not contiguous: keep it in the stream
            return True
        if raw.nbytes < _OUT_OF_BAND_MIN:
            return True
        if raw.nbytes < SHARE_MIN:
            inline.append(raw)
            files.append(None)
        else:
            files.append(_export(raw, directory))
        return False

    try:
        stream = pickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
    except BaseException:
        for spec in files:  # nothing is left behind
            if spec is not None:
                os.unlink(os.path.join(directory, spec[0]))
        raise
    if not any(files):
        return _comm.pack_objects([(stream, inline)])[0]  # the plain format
    buffers = [pickle.PickleBuffer(m) for m in inline]
    return _pack_all([("shared", files, stream, buffers)])[0]


def _attach(name: str, nbytes: int, directory: str) -> mmap.mmap:
    if os.path.basename(name) != name or not name.startswith("result-"):
        raise ValueError(f"a worker named the shared result {name!r}, not a file of the job")
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            raise PermissionError(f"{path} is not a private file of this user (mode 0600)")
        if st.st_size != nbytes:
            raise ValueError(f"{path} holds {st.st_size} bytes, not the {nbytes} announced")
        # Copy-on-write: the array is writable, and the pages are read where they are.
        return mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE)
    finally:
        os.close(fd)
        os.unlink(path)


def load_results(data: bytearray, directory: str | None) -> Any:
    """A results message, its shared buffers mapped from ``directory``."""
    message = _unpack_all(data, [len(data)])[0]
    if not (isinstance(message, tuple) and len(message) == 4 and message[0] == "shared"):
        return message
    _, files, stream, inline = message
    if directory is None:
        raise RuntimeError("a worker shared a result through files, but the root has no job dir")
    buffers: list[Any] = []
    rest = iter(inline)
    try:
        for spec in files:
            buffers.append(next(rest) if spec is None else _attach(spec[0], spec[1], directory))
    except BaseException:
        for spec in files[len(buffers) + 1 :]:  # nothing is left behind
            if spec is not None and os.path.basename(spec[0]) == spec[0]:
                try:
                    os.unlink(os.path.join(directory, spec[0]))
                except OSError:
                    pass
        raise
    return pickle.loads(stream, buffers=buffers)
