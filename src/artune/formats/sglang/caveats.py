"""What a reading of SGLang's files met and could not follow: one ``Caveat`` per place, with its world sizes.

The evaluator reports each statement or condition it steps over
(``Interpreter.unmodelled``); the readers report what they found missing or
unknown in the engine's own files (a renamed dispatch function, an algorithm
artune has no name for). ``Caveats`` gathers both, merges what repeats
across world sizes, and hands the tables ``Caveat`` s (``Table.caveats``):
``check`` prints each as E401, ``explain`` marks the decisions it touches.
"""

from __future__ import annotations

from artune.formats.pyeval import Unmodelled
from artune.table.types import Caveat, CaveatKind


class Caveats:
    """What a reading met in the engine's files and could not follow, one ``Caveat`` per place and kind,
    with the world sizes it was met at (``None``: outside any one, at a module's top level)."""

    def __init__(self) -> None:
        self._met: dict[tuple[str, str, str, str], set[int | None]] = {}

    def add(self, function: str, where: str, detail: str, assumed: str, world_size: int | None) -> None:
        self._met.setdefault((function, where, detail, assumed), set()).add(world_size)

    def unmodelled(self, met: Unmodelled, world_size: int | None) -> None:
        """A statement or condition ``pyeval`` reported (``Interpreter.unmodelled``)."""
        detail = f"'{met.construct}' not evaluated ({met.reason})"
        self.add(met.function or "module level", f"{met.filename}:{met.line}", detail, met.assumed, world_size)

    def update(self, other: Caveats) -> None:
        for key, sizes in other._met.items():
            self._met.setdefault(key, set()).update(sizes)

    def caveats(self, every: tuple[int, ...]) -> tuple[Caveat, ...]:
        """The caveats; one met at a module's top level, or at each of ``every``, touches every world size."""
        out = []
        for (function, where, detail, assumed), sizes in self._met.items():
            touched = () if None in sizes or set(every) <= sizes else tuple(sorted(s for s in sizes if s is not None))
            out.append(Caveat(CaveatKind.UNEVALUATED, function, where, detail, assumed, touched))
        return tuple(out)

    def __bool__(self) -> bool:
        return bool(self._met)


__all__ = ["Caveats"]
