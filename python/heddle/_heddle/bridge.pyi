"""Type stubs of ``heddle._heddle.bridge``: the host side of bridged processes
(``heddle.bridge`` is the public API)."""

from typing import Any, final

from typing_extensions import Self, TypeAlias

__all__ = ["Bridge"]

_Triple: TypeAlias = tuple[int, bytes, bytes]

@final
class Bridge:
    """One running bridged process (see ``heddle.bridge.Bridge``)."""

    def __new__(
        cls,
        command: list[str],
        task: str,
        instance: int = 0,
        parallelism: int = 1,
        bridge_id: int = 1,
        transport: str = "pipe",
        args: list[str] = ...,
        credits: int = 64,
        max_record: int = ...,
        timeout_s: float = 60.0,
        policy: str | None = None,
    ) -> Self: ...
    def send(self, record: _Triple) -> list[_Triple]: ...
    def drain(self) -> list[_Triple]: ...
    def recv(self, timeout_s: float) -> _Triple | None: ...
    def finish(self) -> list[_Triple]: ...
    def abort(self, reason: str) -> str: ...
    def switch(self, transport: str) -> float: ...
    def set_paused(self, paused: bool) -> None: ...
    def status(self) -> dict[str, int]: ...
    def diagnostics(self) -> dict[str, Any]: ...
    @property
    def pid(self) -> int: ...
    @property
    def transport(self) -> str: ...
