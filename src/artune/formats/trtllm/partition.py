"""Cut a function's inputs into the ranges it treats alike, by running it (``artune.formats.trtllm.evaluate``).

``selectStrategyLookUpTable(num_tokens, hidden_size, fusionOp, tp_size)``,
with the SM version it reads, is a function of five inputs. Run at one
point, it records every value it branched or selected on (``Dep``); each
such value is a function of the inputs, so the next value of an input at
which any of them could change (``next_change``) ends the range where the run
takes the same path and gives the same answer. Walking each input from its
smallest value, range by range (SM version, then fused op, TP size, hidden
size, tokens innermost), cuts the whole input space into boxes, each with
one answer, exactly as the function computes them. Where a recorded value
is a function of one input alone (``Dep.key``) the search along it is
cached, so reading a header runs its function a few thousand times, not
once per call.

The search assumes what the header's arithmetic gives: along one input, a
recorded value changes where a truncated ``log2`` steps (at powers of two)
or where the input meets one of the function's constants (``x < 32``,
``tp_size == 8``), and between two such values it changes at most once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from artune.errors import Raised, Unsupported
from artune.formats.trtllm.evaluate import AXES, CallResult, Dep, Point, Runner, hashable

SM, FUSION, TP, HIDDEN, TOKENS = range(len(AXES))
#: the largest value of each numeric input artune cuts (a range reaching it has no upper bound)
DOMAIN = {SM: 1023, TP: 1 << 20, HIDDEN: (1 << 31) - 1, TOKENS: 1 << 40}
#: more ranges than this along one input means the function is not a table of ranges: artune stops there
MAX_RANGES = 4096


@dataclass
class Found:
    """What runs below one range recorded: the single-input values per input (by key), the tests on several
    inputs that read an input directly (searched exactly, with their point), and what the runs skipped."""

    keyed: dict[int, dict[tuple[Any, ...], Dep]] = field(default_factory=lambda: {a: {} for a in range(len(AXES))})
    exact: dict[int, list[tuple[Dep, Point]]] = field(default_factory=lambda: {a: [] for a in range(len(AXES))})
    #: tests on several inputs, each with the point it was taken at: along an input only one of its operands
    #: reads, the test changes where that operand crosses the others' values (``Cutter.test_change``)
    tests: dict[int, list[tuple[Dep, Point]]] = field(default_factory=lambda: {a: [] for a in range(len(AXES))})
    skipped: dict[int, tuple[str, str]] = field(default_factory=dict)

    def merge(self, other: Found, below: int) -> None:
        """Take ``other``'s records for the inputs above ``below`` (the ones still to be cut)."""
        for axis in range(below):
            for key, dep in other.keyed[axis].items():
                self.keyed[axis].setdefault(key, dep)
            self.exact[axis] += other.exact[axis]
            self.tests[axis] += other.tests[axis]
        for line, what in other.skipped.items():
            self.skipped.setdefault(line, what)

    def add(self, outcome: CallResult, point: Point) -> None:
        """Take what one run recorded (flattened once per path: runs that reuse a path share it)."""
        if outcome.cache is None:
            keyed: dict[int, dict[tuple[Any, ...], Dep]] = {a: {} for a in range(len(AXES))}
            exact: list[tuple[int, Dep]] = []
            tests: list[tuple[int, Dep]] = []
            for dep in (*outcome.deps, *outcome.risky):  # what it answered by, and what could fail elsewhere
                _flatten(dep, None, keyed, exact, tests)
            outcome.cache = (keyed, exact, tests)
        keyed, exact, tests = outcome.cache
        for axis, deps in keyed.items():
            for key, dep in deps.items():
                self.keyed[axis].setdefault(key, dep)
        for axis, dep in exact:
            self.exact[axis].append((dep, point))
        for axis, dep in tests:
            self.tests[axis].append((dep, point))
        for line, what in outcome.skipped.items():
            self.skipped.setdefault(line, what)


def _flatten(
    dep: Dep,
    test: Dep | None,
    keyed: dict[int, dict[tuple[Any, ...], Dep]],
    exact: list[tuple[int, Dep]],
    tests: list[tuple[int, Dep]],
) -> None:
    """``dep``'s values of one input alone (the outermost ones); the tests on several inputs whose operands are
    each of one input or constant, per input (``tests``); and the tests that read an input directly in a
    value of several inputs (searched along it exactly rather than at every value of the input)."""
    if dep.key is not None:
        (axis,) = dep.axes
        if dep.key[0] == "in" and test is not None:
            exact.append((axis, test))
        else:
            keyed[axis].setdefault(dep.key, dep)
        return
    covered: set[int] = set()  # operands whose changes the test's own search covers
    if dep.boolean and dep.op is not None:
        for axis in dep.axes - {FUSION}:  # a fused op is compared by its operand's value (a category: no search)
            reading = [o for o in dep.operands if isinstance(o, Dep) and axis in o.axes]
            if len(reading) == 1 and reading[0].key is not None:
                tests.append((axis, dep))
                covered.add(id(reading[0]))
    for child in dep.children:
        if id(child) not in covered:
            _flatten(child, dep if dep.boolean else test, keyed, exact, tests)


Answer = tuple[str, Any]  # ("value", the returned value) or (failure kind, message)
Pieces = list[tuple[int, int | None, Answer]]  # along tokens (or the innermost input)


@dataclass(frozen=True)
class Box:
    """A range of one input and what lies below it (``below``: the next input's boxes, or the answer)."""

    lo: int
    hi: int | None  # None: no upper bound
    below: Any


class Cutter:
    """Cuts the inputs of one function, ``axes`` outermost first (``FUSION`` takes ``fusions``, the enum's values)."""

    def __init__(self, machine: Runner, axes: Sequence[int], fusions: Sequence[int] = (), start: Point | None = None):
        self.machine = machine
        self.axes = tuple(axes)
        self.fusions = tuple(sorted(fusions))
        self.start: Point = start or (0, self.fusions[0] if self.fusions else 0, 1, 1, 1)
        self.cache: dict[tuple[Any, ...], int] = {}
        self.runs = 0

    def cut(self) -> tuple[list[Box], Found]:
        """Every box of the inputs, outermost input first, and what the runs recorded."""
        return self._cut(0, self.start)

    def _cut(self, level: int, point: Point) -> tuple[list[Box], Found]:
        axis = self.axes[level]
        found = Found()
        boxes: list[Box] = []
        if axis == FUSION:
            remaining = list(self.fusions)
            while remaining:
                at = _with(point, axis, remaining[0])
                below, sub = self._below(level, at)
                group = [v for v in remaining if self._alike(sub, at, v)]
                remaining = [v for v in remaining if v not in group]
                boxes.append(Box(group[0], group[-1], (tuple(group), below)))
                found.merge(sub, axis)
            return boxes, found
        x, top = (1, DOMAIN[axis])
        while x <= top:
            at = _with(point, axis, x)
            below, sub = self._below(level, at)
            hi = min(
                [self.next_change(dep, axis, at) for dep in sub.keyed[axis].values()]
                + [self.test_change(dep, axis, p) for dep, p in sub.tests[axis]]
                + [self._search(dep.fn, p, axis, x) for dep, p in sub.exact[axis]]
                + [top + 1]
            )
            boxes.append(Box(x, None if hi > top else hi - 1, below))
            if len(boxes) > MAX_RANGES:
                raise Unsupported(f"more than {MAX_RANGES} ranges of {AXES[axis]}: not a table of ranges")
            found.merge(sub, axis)
            x = hi
        return boxes, found

    def _below(self, level: int, point: Point) -> tuple[Any, Found]:
        if level + 1 < len(self.axes):
            return self._cut(level + 1, point)
        self.runs += 1
        outcome = self.machine.run(point)
        found = Found()
        found.add(outcome, point)
        answer: Answer = ("value", outcome.value) if outcome.failure is None else outcome.failure
        return answer, found

    def _alike(self, found: Found, point: Point, value: int) -> bool:
        """Whether fused op ``value`` takes every path that ``point``'s fused op takes below it."""
        other = _with(point, FUSION, value)
        return all(_same(_answer(d.fn, other), _answer(d.fn, point)) for d in found.keyed[FUSION].values()) and all(
            _same(_answer(d.fn, _with(p, FUSION, value)), _answer(d.fn, p)) for d, p in found.exact[FUSION]
        )

    def next_change(self, dep: Dep, axis: int, point: Point) -> int:
        """The next value of ``axis`` above ``point``'s at which ``dep`` (a value of ``axis`` alone) changes."""
        key = (dep.key, axis, point[axis])
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self._search(dep.fn, point, axis, point[axis], constants_of(dep.key))
        return found

    def test_change(self, test: Dep, axis: int, point: Point) -> int:
        """The next value of ``axis`` above ``point``'s at which ``test`` changes, where one operand of it (a value
        of ``axis`` alone) reads ``axis``: a search on that operand against the others' values at ``point``,
        cached by them (the bounds tests of every row share a few)."""
        values: list[Any] = []
        at = -1
        for i, operand in enumerate(test.operands):
            if isinstance(operand, Dep) and axis in operand.axes:
                at, values = i, [*values, None]
                continue
            try:
                values.append(operand.fn(point) if isinstance(operand, Dep) else operand)
            except Raised:
                return min(
                    self.next_change(c, axis, point) for c in test.children if c.key is not None and axis in c.axes
                )
        reader = test.operands[at]
        op = test.op
        assert op is not None and isinstance(reader, Dep)
        key = (test.op_key, at, reader.key, tuple(hashable(v) for v in values), axis, point[axis])
        found = self.cache.get(key)
        if found is None:

            def along(p: Point) -> Any:
                args = list(values)
                args[at] = reader.fn(p)
                return op(*args)

            consts = constants_of(reader.key) | frozenset(
                v for v in values if isinstance(v, int) and not isinstance(v, bool)
            )
            found = self.cache[key] = self._search(along, point, axis, point[axis], consts)
        return found

    def _search(
        self, fn: Callable[[Point], Any], point: Point, axis: int, x0: int, constants: frozenset[int] = frozenset()
    ) -> int:
        """The smallest value above ``x0`` where ``fn`` (along ``axis``) differs from its value at ``x0``; one past
        the domain when there is none. It asks, in order, the values where the header's arithmetic changes
        (powers of two, each side of them, each side of its constants) and ``x0`` plus each power of two, then
        bisects between the last one alike and the first one not."""
        top = DOMAIN[axis]
        first = _answer(fn, _with(point, axis, x0))
        same = x0
        for x in _candidates(x0, top, constants):
            if not _same(_answer(fn, _with(point, axis, x)), first):
                break
            same = x
        else:
            return top + 1
        while x - same > 1:
            mid = (same + x) // 2
            if _same(_answer(fn, _with(point, axis, mid)), first):
                same = mid
            else:
                x = mid
        return x


def _candidates(x0: int, top: int, constants: frozenset[int]) -> list[int]:
    """The values above ``x0`` (up to ``top``) a search asks first."""
    found = {top}
    for k in range(top.bit_length() + 1):
        found |= {(1 << k) - 1, 1 << k, (1 << k) + 1, x0 + (1 << k)}
    for c in constants:
        found |= {c - 1, c, c + 1}
    return sorted(x for x in found if x0 < x <= top)


def constants_of(key: Any) -> frozenset[int]:
    """Every integer in a ``Dep.key`` (the constants a value of one input is compared or shifted by)."""
    if isinstance(key, bool):
        return frozenset()
    if isinstance(key, int):
        return frozenset((key,))
    if isinstance(key, tuple):
        return frozenset().union(*(constants_of(k) for k in key)) if key else frozenset()
    return frozenset()


def _with(point: Point, axis: int, value: int) -> Point:
    return (*point[:axis], value, *point[axis + 1 :])  # type: ignore[return-value]


def _answer(fn: Callable[[Point], Any], point: Point) -> Any:
    try:
        return ("value", fn(point))
    except Raised as err:
        return (err.kind,)


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    return (
        isinstance(a, tuple)
        and isinstance(b, tuple)
        and len(a) == len(b) == 2
        and isinstance(a[1], float)
        and isinstance(b[1], float)
        and math.isnan(a[1])
        and math.isnan(b[1])
    )


__all__ = ["DOMAIN", "FUSION", "HIDDEN", "SM", "TOKENS", "TP", "Box", "Cutter", "Found"]
