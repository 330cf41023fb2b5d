"""Run a TensorRT-LLM header's C++ function on one call, as the compiled function would, and see what it read.

``Runner.run(point)`` executes a parsed function (``artune.formats.trtllm.syntax``)
for one point of its inputs: the SM version, the fused op, the TP size, the
hidden size and the token count (``AXES``). Values follow C++'s rules where
the header relies on them: ``size_t`` wraps modulo 2**64, ``static_cast`` of a
double truncates toward zero, comparisons convert as the usual arithmetic
conversions do, ``||`` and ``&&`` short-circuit, ``.at()`` throws where ``[]``
is undefined. Where C++ leaves the result undefined, artune takes what g++
on x86-64 does, which is what the engine's builds run: a negative double
cast to ``size_t`` goes through a signed conversion (-1.0 becomes 2**64 - 1;
``log2(0)``'s -inf becomes 2**63), far out of every table's range.

Each value that depends on an input carries a ``Dep``: which inputs, and a
function of the point that recomputes it. Every value the run branches on or
selects with is recorded (``CallResult.deps``), so that the caller
(``artune.formats.trtllm.shapes``) can ask where along an input the run
could go another way (``next_change``) and cut each input into the ranges
the function treats alike, exactly. A statement outside what is modelled is
skipped and reported (``CallResult.skipped``): the rest still runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from artune.errors import Raised, Unsupported
from artune.formats.trtllm import syntax as s

AXES = ("sm", "fusion", "tp", "hidden", "tokens")
Point = tuple[int, int, int, int, int]
U64 = 1 << 64

#: the calls the evaluator models, and how: the environment is the default one (nothing set)
MODELLED_CALLS = {
    "log2": "std::log2",
    "min": "std::min",
    "max": "std::max",
    "getSMVersion": "the SM version of the call (an input)",
    "getenv": "std::getenv: the variable is not set (nullptr)",
    "getEnvForceDeterministicAllReduce": "false: forced-deterministic all-reduce is off (its default)",
}


class Dep:
    """How a value depends on the inputs: ``axes``, ``fn(point)`` recomputing it, and either a structural
    ``key`` (a value of one input alone: searches along it are cached by it) or the ``children`` it was built
    from. ``boolean``: the value is a test's (true or false). A value of several inputs keeps how it is made:
    ``op(*operands)`` with ``op_key`` naming ``op``, each operand a ``Dep`` or a constant."""

    __slots__ = ("axes", "boolean", "children", "fn", "key", "mask", "op", "op_key", "operands")

    def __init__(
        self,
        axes: frozenset[int],
        fn: Callable[[Point], Any],
        key: tuple[Any, ...] | None,
        children: tuple[Dep, ...] = (),
        boolean: bool = False,
        op: Callable[..., Any] | None = None,
        op_key: tuple[Any, ...] = (),
        operands: tuple[Any, ...] = (),
    ) -> None:
        self.axes = axes
        self.mask = sum(1 << a for a in axes)
        self.fn = fn
        self.key = key
        self.children = children
        self.boolean = boolean
        self.op = op
        self.op_key = op_key
        self.operands = operands


@dataclass(frozen=True)
class V:
    """A value of the run: the Python value, its C++ kind and its ``Dep`` (``None``: the same at every point).

    Kinds: ``int`` (signed), ``size_t`` (unsigned 64), ``double``, ``bool``, ``enum`` (an enum's int),
    ``map``, ``vec``, ``iter`` (``(map id, key or None)``), ``str``, ``null``.
    """

    value: Any
    kind: str
    dep: Dep | None = None


@dataclass
class CallResult:
    """One run: what the function returned (``value``) or why it has none (``failure``: "undefined",
    "throws", "unevaluated"), the values it branched or selected on, and the statements it skipped.

    ``branches`` are the tests it took, each with its value, and ``result`` the returned value's ``Dep``: a
    point where every test comes out the same takes the same path, so its answer is ``result.fn(point)``
    (``Runner.run`` reuses a run that way instead of running again)."""

    value: Any = None
    failure: tuple[str, str] | None = None
    deps: list[Dep] = field(default_factory=list)
    skipped: dict[int, tuple[str, str]] = field(default_factory=dict)  # line -> (statement, why)
    branches: list[tuple[Dep, Any]] = field(default_factory=list)
    risky: list[Dep] = field(default_factory=list)  # values whose making can throw or be undefined at another point
    result: Dep | None = None
    cache: Any = None  # what a caller derives from this run's deps, kept with it for the runs that reuse it

    def takes_path(self, point: Point, since: Point | None = None) -> bool:
        """Whether a run at ``point`` would take every test as this one did (and so this run's path); ``since``: a
        point known to take it, so that only the tests on the inputs that differ from it are asked."""
        changed = sum(1 << a for a in range(len(point)) if since is None or since[a] != point[a])
        for dep, value in self.branches:
            if not dep.mask & changed:
                continue
            try:
                if dep.fn(point) != value:
                    return False
            except Raised:
                return False
        for dep in self.risky:
            if dep.mask & changed:
                try:
                    dep.fn(point)
                except Raised:
                    return False
        return True

    def at(self, point: Point) -> CallResult:
        """This run's path at ``point`` (which ``takes_path``): the answer there, the same records."""
        if self.result is None:
            return self
        try:
            value, failure = self.result.fn(point), None
        except Raised as err:
            value, failure = None, (err.kind, str(err))
        return CallResult(value, failure, self.deps, self.skipped, self.branches, self.risky, self.result, self.cache)


@dataclass(frozen=True)
class CxxFunction:
    """A parsed function: its name, where it is, its parameters as ``(name, axis, kind)`` and its body."""

    name: str
    where: str  # "FILE:LINE"
    params: tuple[tuple[str, int, str], ...]
    body: tuple[s.Stmt, ...]
    text: str  # the function's source, comments blanked (for its fingerprint)


def _fail(kind: str, message: str) -> Raised:
    return Raised(kind, message)


def _wrap(value: int) -> int:
    return value % U64


def _trunc(value: float) -> int:
    """A double converted to an integer as x86-64 g++ code does: truncation, and the indefinite integer
    (-2**63) for what does not fit (infinity, NaN)."""
    if math.isnan(value) or math.isinf(value) or abs(value) >= 2**63:
        return -(2**63)
    return int(value)


def _convert(value: Any, source: str, target: str) -> Any:
    """``value`` of kind ``source`` as kind ``target`` (``static_cast``, or a usual arithmetic conversion)."""
    if target == "size_t":
        return _wrap(_trunc(value) if source == "double" else int(value))
    if target == "int" or target == "enum":
        return _trunc(value) if source == "double" else int(value)
    if target == "double":
        return float(value)
    if target == "bool":
        return bool(value)
    raise Unsupported(f"a conversion from {source} to {target}")


_CAST_KINDS = {
    "size_t": "size_t",
    "uint64_t": "size_t",
    "unsigned": "size_t",
    "int": "int",
    "long": "int",
    "int64_t": "int",
    "int32_t": "int",
    "uint32_t": "int",
    "double": "double",
    "float": "double",
    "bool": "bool",
    "AllReduceStrategyType": "enum",
    "AllReduceFusionOp": "enum",
}


def _common(a: str, b: str) -> str:
    """The kind two operands of an arithmetic or comparison operator are converted to."""
    if "double" in (a, b):
        return "double"
    if "size_t" in (a, b):
        return "size_t"
    return "int"


def _arith(op: str, x: Any, y: Any, kind: str) -> Any:
    if op == "+":
        out = x + y
    elif op == "-":
        out = x - y
    elif op == "*":
        out = x * y
    elif op == "/":
        if y == 0:
            raise _fail("undefined", "a division by zero")
        out = x / y if kind == "double" else int(x / y)
    elif op == "%":
        if y == 0 or kind == "double":
            raise _fail("undefined", "a remainder by zero")
        out = int(math.fmod(x, y))
    elif op == "<<":
        out = x << y
    elif op == ">>":
        out = x >> y
    else:
        raise Unsupported(f"the operator {op!r}")
    return _wrap(out) if kind == "size_t" else out


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda x, y: x < y,
    ">": lambda x, y: x > y,
    "<=": lambda x, y: x <= y,
    ">=": lambda x, y: x >= y,
    "==": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
}


def _combine(
    values: tuple[V, ...], op: Callable[..., Any], key: tuple[Any, ...], kind: str, boolean: bool = False
) -> V:
    """The value ``op(*raw values)`` of kind ``kind``, with the ``Dep`` of its dependent operands."""
    raw = [v.value for v in values]
    deps = [v.dep for v in values if v.dep is not None]
    try:
        result = op(*raw)
    except Raised as err:
        err.deps = tuple(deps)  # type: ignore[attr-defined]  # what the failure depends on
        raise
    kind = _kind_of(result) if kind == "auto" else kind
    if not deps:
        return V(result, kind)
    getters: list[Callable[[Point], Any]] = [
        (v.dep.fn if v.dep is not None else (lambda _p, c=v.value: c)) for v in values
    ]
    last: list[Any] = [None, None]  # the last point asked and the value there: shared sub-values compute once

    def fn(point: Point) -> Any:
        if point is last[0]:
            return last[1]
        value = op(*(g(point) for g in getters))
        last[0], last[1] = point, value
        return value

    axes = frozenset().union(*(d.axes for d in deps))
    if len(axes) == 1 and all(d.key is not None for d in deps):
        child_keys = tuple(v.dep.key if v.dep is not None else ("const", hashable(v.value)) for v in values)
        return V(result, kind, Dep(axes, fn, (key, *child_keys), boolean=boolean))
    operands = tuple(v.dep if v.dep is not None else v.value for v in values)
    return V(result, kind, Dep(axes, fn, None, tuple(deps), boolean, op, key, operands))


def hashable(value: Any) -> Any:
    """``value`` as a cache key holds it: containers by identity (they are the header's constants, alive while
    the header is read), everything else by value."""
    return ("id", id(value)) if isinstance(value, (dict, list, tuple, MapIter)) else value


def _kind_of(value: Any) -> str:
    """The kind of a value taken out of a container."""
    if isinstance(value, tuple):
        return "vec"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "double"
    return "int"


class MapIter:
    """An iterator into one of the header's maps: at ``key``, or at ``end()`` (``key`` None)."""

    __slots__ = ("key", "map")

    def __init__(self, map_: dict[Any, Any], key: Any) -> None:
        self.map = map_
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MapIter) and self.map is other.map and self.key == other.key

    def __hash__(self) -> int:
        return hash((id(self.map), self.key))


class Runner:
    """Runs one parsed function on points, against the header's globals (``names``) and enums."""

    def __init__(self, function: CxxFunction, names: Callable[[str], V | None], enums: Mapping[str, Mapping[str, int]]):
        self.function = function
        self.names = names
        self.enums = enums
        self.paths: list[tuple[CallResult, list[Point]]] = []  # a run per path through the function, and a point on it
        self.runs = 0  # how many times the body was interpreted (the rest reused a path)

    def run(self, point: Point) -> CallResult:
        """The function's answer at ``point`` (indexed as ``AXES``), with what it depended on."""
        for i, (path, seen) in enumerate(self.paths):
            if path.takes_path(point, seen[0]):
                seen[0] = point
                if i:  # the path just taken is the likeliest next
                    self.paths.insert(0, self.paths.pop(i))
                return path.at(point)
        self.runs += 1
        run = _Run(self, point)
        try:
            value = run.block(self.function.body)
            if value is None:
                run.outcome.failure = ("unevaluated", "the function ended without a return artune could evaluate")
            else:
                run.outcome.value = value.value
                run.outcome.result = value.dep
                run.note(value)
                self.paths.insert(0, (run.outcome, [point]))
        except Raised as err:
            run.outcome.failure = (err.kind, str(err))
            run.outcome.deps.extend(getattr(err, "deps", ()))
        return run.outcome


def evaluate_constant(node: s.Expr, names: Callable[[str], V | None], enums: Mapping[str, Mapping[str, int]]) -> V:
    """The value of an expression outside any function (a global's initializer), by the same rules."""
    machine = Runner(CxxFunction("<initializer>", "", (), (), ""), names, enums)
    value = _Run(machine, (0,) * len(AXES)).expr(node)
    if value.dep is not None:
        raise Unsupported("a global's value that depends on the call")
    return value


class _Run:
    """One run of a function: its local variables and what it recorded."""

    def __init__(self, machine: Runner, point: Point) -> None:
        self.machine = machine
        self.point = point
        self.locals: dict[str, V] = {}
        for name, axis, kind in machine.function.params:
            self.locals[name] = self.input(axis, kind)
        self.outcome = CallResult()

    def input(self, axis: int, kind: str) -> V:
        return V(self.point[axis], kind, Dep(frozenset((axis,)), lambda p, a=axis: p[a], ("in", axis)))

    def note(self, value: V) -> V:
        """Record that the run's answer depends on ``value``; return it."""
        if value.dep is not None:
            self.outcome.deps.append(value.dep)
        return value

    def risk(self, value: V) -> V:
        """Record that making ``value`` could throw or be undefined at another point; return it."""
        if value.dep is not None:
            self.outcome.risky.append(value.dep)
        return value

    def branch(self, test: V) -> V:
        """Record that the run took a path by ``test``; return it."""
        if test.dep is not None:
            self.outcome.branches.append((test.dep, test.value))
        return self.note(test)

    # ---- statements

    def block(self, body: tuple[s.Stmt, ...]) -> V | None:
        """Run ``body``; the value of a ``return`` in it, or ``None`` when it falls through."""
        for stmt in body:
            try:
                found = self.statement(stmt)
            except Raised:  # the engine's code itself throws or is undefined here: the run ends
                raise
            except Unsupported as err:
                self.skip(stmt, str(err))
                continue
            if found is not None:
                return found
        return None

    def skip(self, stmt: s.Stmt, why: str) -> None:
        text = stmt.text if not isinstance(stmt, s.If) else f"if ({stmt.text}) ..."
        self.outcome.skipped.setdefault(stmt.line, (text, why))

    def statement(self, stmt: s.Stmt) -> V | None:
        if isinstance(stmt, s.Return):
            return self.expr(stmt.value)
        if isinstance(stmt, s.If):
            test = self.branch(self.truth(self.expr(stmt.test)))
            return self.block(stmt.then if test.value else stmt.other)
        if isinstance(stmt, s.Declare):
            if stmt.value is None:
                raise Unsupported("a declaration without a value")
            value = self.expr(stmt.value)
            if len(stmt.names) > 1:
                raise Unsupported("a structured binding")
            self.locals[stmt.names[0]] = self.declared(value, stmt.type)
            return None
        if isinstance(stmt, s.Assign):
            if stmt.name not in self.locals:
                raise Unsupported(f"an assignment to {stmt.name}, which is not a local of the function")
            value = self.expr(stmt.value)
            if stmt.op != "=":
                value = self.binary(stmt.op[0], self.locals[stmt.name], value)
            self.locals[stmt.name] = self.declared(value, self.locals[stmt.name].kind)
            return None
        if isinstance(stmt, s.ExprStmt):
            self.note(self.expr(stmt.value))
            return None
        assert isinstance(stmt, s.UnknownStmt)
        raise Unsupported(stmt.why)

    def declared(self, value: V, type_: str) -> V:
        """``value`` stored in a variable of ``type_`` (``auto`` keeps its kind)."""
        kind = _CAST_KINDS.get(type_.split()[-1] if type_ else "auto")
        if kind is None or kind == value.kind or value.kind in ("map", "vec", "iter", "str", "null"):
            return value
        return self.cast(value, kind)

    # ---- expressions

    def expr(self, node: s.Expr) -> V:
        if isinstance(node, s.Num):
            return V(node.value, "double" if isinstance(node.value, float) else ("size_t" if node.unsigned else "int"))
        if isinstance(node, s.Str):
            return V(node.value, "str")
        if isinstance(node, s.Name):
            return self.name(node)
        if isinstance(node, s.Unary):
            return self.unary(node)
        if isinstance(node, s.Binary):
            if node.op in ("||", "&&"):
                return self.logical(node)
            return self.binary(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, s.Ternary):
            test = self.branch(self.truth(self.expr(node.test)))
            return self.expr(node.then if test.value else node.other)
        if isinstance(node, s.Cast):
            kind = _CAST_KINDS.get(node.type)
            if kind is None:
                raise Unsupported(f"a cast to {node.type}")
            return self.cast(self.expr(node.operand), kind)
        if isinstance(node, s.Call):
            return self.call(node)
        if isinstance(node, s.Member):
            return self.member(self.expr(node.owner), node.name, node.arrow)
        if isinstance(node, s.Subscript):
            return self.index(self.expr(node.owner), self.expr(node.index))
        raise Unsupported(f"a braced list {node!r} inside the function")

    def name(self, node: s.Name) -> V:
        if len(node.parts) == 1 and node.last in self.locals:
            return self.locals[node.last]
        if node.last in ("true", "false") and len(node.parts) == 1:
            return V(node.last == "true", "bool")
        if node.last == "nullptr":
            return V(None, "null")
        if len(node.parts) >= 2 and node.parts[-2] in self.machine.enums:
            members = self.machine.enums[node.parts[-2]]
            if node.last not in members:
                raise Unsupported(f"{node.parts[-2]}::{node.last} is not a member of the enum")
            return V(members[node.last], "enum")
        found = self.machine.names(node.last)
        if found is None:
            raise Unsupported(f"{'::'.join(node.parts)} is neither a local nor defined in the header")
        return found

    def truth(self, value: V) -> V:
        if value.kind in ("map", "vec", "iter", "str"):
            raise Unsupported(f"a {value.kind} used as a test")
        return _combine((value,), bool, ("bool",), "bool", boolean=True)

    def unary(self, node: s.Unary) -> V:
        value = self.expr(node.operand)
        if node.op == "!":
            return _combine((self.truth(value),), lambda x: not x, ("not",), "bool", boolean=True)
        kind = "int" if value.kind in ("bool", "enum") else value.kind
        if kind not in ("int", "size_t", "double"):
            raise Unsupported(f"{node.op} on a {value.kind}")
        sign = -1 if node.op == "-" else 1
        return _combine((value,), lambda x: _wrap(sign * x) if kind == "size_t" else sign * x, ("neg", sign), kind)

    def logical(self, node: s.Binary) -> V:
        left = self.branch(self.truth(self.expr(node.left)))
        if left.value == (node.op == "||"):
            return left
        return self.branch(self.truth(self.expr(node.right)))

    def binary(self, op: str, left: V, right: V) -> V:
        if op in _COMPARE:
            if left.kind in ("iter", "null", "str") or right.kind in ("iter", "null", "str"):
                if op not in ("==", "!="):
                    raise Unsupported(f"{op} between a {left.kind} and a {right.kind}")
                return _combine((left, right), _COMPARE[op], ("cmp", op), "bool", boolean=True)
            kind = _common(self.numeric(left), self.numeric(right))
            lk, rk = left.kind, right.kind

            def compare(x: Any, y: Any) -> bool:
                return _COMPARE[op](_convert(x, lk, kind), _convert(y, rk, kind))

            return _combine((left, right), compare, ("cmp", op, lk, rk), "bool", boolean=True)
        kind = _common(self.numeric(left), self.numeric(right))
        if op in ("<<", ">>"):
            kind = "size_t" if left.kind == "size_t" else "int"
        lk, rk = left.kind, right.kind
        value = _combine(
            (left, right),
            lambda x, y: _arith(op, _convert(x, lk, kind), _convert(y, rk, kind), kind),
            ("arith", op, lk, rk),
            kind,
        )
        return self.risk(value) if op in ("/", "%") else value

    def numeric(self, value: V) -> str:
        if value.kind in ("int", "size_t", "double"):
            return value.kind
        if value.kind in ("bool", "enum"):
            return "int"
        raise Unsupported(f"arithmetic on a {value.kind}")

    def cast(self, value: V, kind: str) -> V:
        if value.kind == kind:
            return value
        source = self.numeric(value)
        return _combine((value,), lambda x: _convert(x, source, kind), ("cast", source, kind), kind)

    def call(self, node: s.Call) -> V:
        if isinstance(node.function, s.Member):
            owner = self.expr(node.function.owner)
            args = [self.expr(a) for a in node.args]
            return self.method(owner, node.function.name, args)
        if not isinstance(node.function, s.Name):
            raise Unsupported("a call of something that is not a named function")
        name = node.function.last
        if name == "getSMVersion":
            return self.input(AXES.index("sm"), "int")
        if name == "getEnvForceDeterministicAllReduce":
            return V(False, "bool")
        if name == "getenv":
            return V(None, "null")
        args = [self.expr(a) for a in node.args]
        if name == "log2" and len(args) == 1:
            source = self.numeric(args[0])
            return _combine((args[0],), lambda x: _log2(_convert(x, source, "double")), ("log2", source), "double")
        if name in ("min", "max") and len(args) == 2:
            kind = _common(self.numeric(args[0]), self.numeric(args[1]))
            pick = min if name == "min" else max
            ka, kb = args[0].kind, args[1].kind
            return _combine(
                (args[0], args[1]),
                lambda x, y: pick(_convert(x, ka, kind), _convert(y, kb, kind)),
                (name, ka, kb),
                kind,
            )
        raise Unsupported(
            f"a call of {'::'.join(node.function.parts)}, which artune does not model (it models "
            f"{', '.join(MODELLED_CALLS)})"
        )

    def method(self, owner: V, name: str, args: list[V]) -> V:
        if owner.kind == "map" and name in ("find", "at", "count") and len(args) == 1:
            return self.risk(_combine((owner, args[0]), _MAP_METHODS[name], ("map." + name,), _MAP_KINDS[name]))
        if owner.kind == "map" and name == "end" and not args:
            return _combine((owner,), lambda m: MapIter(m, None), ("map.end",), "iter")
        if owner.kind in ("map", "vec") and name == "size" and not args:
            return _combine((owner,), len, ("size",), "size_t")
        if owner.kind == "vec" and name == "at" and len(args) == 1:
            return self.risk(_combine((owner, args[0]), _vec_at, ("vec.at",), "auto"))
        raise Unsupported(f"the method {name}() of a {owner.kind}")

    def member(self, owner: V, name: str, arrow: bool) -> V:
        if owner.kind == "iter" and arrow and name in ("first", "second"):
            return self.deref(owner, name)
        raise Unsupported(f"{'->' if arrow else '.'}{name} of a {owner.kind}")

    def deref(self, owner: V, name: str) -> V:
        return self.risk(_combine((owner,), lambda it: _deref(it, name), ("deref", name), "auto"))

    def index(self, owner: V, index: V) -> V:
        if owner.kind == "map":
            return _combine((owner, index), lambda m, k: m.get(k, ()), ("map.[]",), "auto")
        if owner.kind == "vec":
            return self.risk(_combine((owner, index), _vec_index, ("vec.[]",), "auto"))
        raise Unsupported(f"a subscript of a {owner.kind}")


def _log2(x: float) -> float:
    if x > 0:
        return math.log2(x)
    return -math.inf if x == 0 else math.nan


def _deref(it: MapIter, name: str) -> Any:
    if it.key is None:
        raise _fail("undefined", f"->{name} of an end() iterator (a key the map does not hold)")
    return it.map[it.key] if name == "second" else it.key


def _vec_index(vec: tuple[Any, ...], i: int) -> Any:
    if not 0 <= i < len(vec):
        raise _fail("undefined", f"[{i}] of a vector of {len(vec)}")
    return vec[i]


def _vec_at(vec: tuple[Any, ...], i: int) -> Any:
    if not 0 <= i < len(vec):
        raise _fail("throws", f"std::out_of_range: .at({i}) of a vector of {len(vec)}")
    return vec[i]


def _map_at(m: dict[Any, Any], k: Any) -> Any:
    if k not in m:
        raise _fail("throws", f"std::out_of_range: .at({k}) of a map without that key")
    return m[k]


_MAP_METHODS: dict[str, Callable[[dict[Any, Any], Any], Any]] = {
    "find": lambda m, k: MapIter(m, k if k in m else None),
    "at": _map_at,
    "count": lambda m, k: int(k in m),
}
_MAP_KINDS = {"find": "iter", "at": "auto", "count": "size_t"}
