"""A spinner on stderr while the command line waits on something slow, on a terminal only.

Reading an engine release (downloaded once, evaluated, then cached) takes
seconds, up to half a minute on a loaded machine; a command that prints
nothing that long looks hung. ``waiting`` shows what it waits on, and
leaves nothing behind: the line goes when the wait ends, and a pipe, a file
or CI's log sees no output at all.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

_shown: list[str] = []  # the wait being shown: one at a time (an inner wait is part of the outer one)


@contextmanager
def waiting(text: str) -> Iterator[None]:
    """Show ``text`` with a spinner on stderr while the block runs, when stderr is a terminal."""
    if _shown or not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    _shown.append(text)
    try:
        with Console(stderr=True).status(text):
            yield
    finally:
        _shown.pop()
