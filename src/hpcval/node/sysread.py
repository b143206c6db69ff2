"""Reading ``/proc`` and ``/sys`` for the node's fingerprint without raising:
a category's values and the keys it could not read (:class:`Category`)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

Values = dict[str, str]

#: what reading a node's file or tool can raise: its key is then unknown (any
#: other exception is a fault of the reader: its whole category is unknown, "*")
UNREADABLE = (OSError, ValueError, subprocess.SubprocessError)


class Category:
    """One category's values and unreadable keys."""

    def __init__(self) -> None:
        self.values: Values = {}
        self.unknown: list[str] = []

    def put(self, key: str, read: Callable[[], str | None]) -> None:
        """``read()``: the value, or None when the node has no such source;
        an exception names ``key`` unreadable."""
        try:
            value = read()
        except UNREADABLE:
            self.unknown.append(key)
            return
        if value is not None:
            self.values[key] = value

    def update(self, key: str, read: Callable[[], Values]) -> None:
        """Several keys at once (``key`` names them when ``read`` fails)."""
        try:
            self.values.update(read())
        except UNREADABLE:
            self.unknown.append(key)


def read_text(path: Path) -> str:
    return path.read_text(errors="replace").strip()


def read_opt(path: Path) -> str | None:
    """The file's text, None when it does not exist (unreadable: raises)."""
    if not path.exists():
        return None
    return read_text(path)
