"""A restricted evaluator for the Python subset that engines write their tables in.

Nothing from a checkout is imported, compiled or executed: the file is parsed
with ``ast`` and this module walks the tree itself. It knows numbers, strings,
``+ - * / // % << >>``, comparisons, ``and/or/not``, conditional expressions,
dict/list/tuple/set literals and comprehensions, names bound earlier,
``def`` and ``lambda`` (with closures), ``class X(NamedTuple)`` records and a
few pure builtins (``int``, ``float``, ``min``, ``max``, ``range``, ``len``,
``isinstance``, ...). Imports bind opaque ``Symbol`` s; attributes of a
symbol are symbols (``AllReduceAlgo.ONE_SHOT_PUSH``), calling one is an error
unless the caller registered a fake for it (``fakes``: how a reader stands in
for ``torch.cuda.get_device_capability``). Attribute access reaches only
record fields, symbols and a few pure methods of dicts, lists, tuples and
strings (``get``, ``items``, ...; no ``format``). There is no ``while``, no
``try``, no I/O, and step, depth and size budgets bound the work, so a
hostile file can only make the import fail, with an ``Unsupported`` error
naming the file, the line and the construct.

``restricted=True`` (vLLM's tables) allows constant expressions only: no
calls except ``int``/``float``, no functions, no comprehensions.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from artune.errors import TableError

MAX_STEPS = 2_000_000
MAX_DEPTH = 64


class Unsupported(TableError):
    """The file uses a construct the evaluator does not understand."""


class Raised(Unsupported):
    """The interpreted code raised (a missing dict key, a failed assert); ``kind`` names it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Symbol:
    """An opaque name from outside the file (an import, ``num_sm``); attributes extend the path."""

    path: str

    def __str__(self) -> str:
        return self.path


@dataclass(frozen=True)
class RecordType:
    """A ``NamedTuple`` (or dataclass) class of the file: field names in order, with defaults."""

    name: str
    fields: tuple[str, ...]
    defaults: Mapping[str, Any] = field(hash=False)


@dataclass(frozen=True)
class Record:
    """An instance of a ``RecordType``; ``lines`` are the call sites that built it, outermost first."""

    type: RecordType
    values: tuple[Any, ...]
    lines: tuple[int, ...] = field(default=(), compare=False)

    def get(self, name: str, default: Any = None) -> Any:
        """The field ``name``, or ``default`` when the record has no such field."""
        if name in self.type.fields:
            return self.values[self.type.fields.index(name)]
        return default

    def __iter__(self):  # a NamedTuple is a tuple
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> Any:
        return self.values[index]


@dataclass
class Function:
    """A ``def`` or ``lambda`` of the file with the scope it closes over."""

    node: ast.FunctionDef | ast.Lambda
    scope: Scope
    name: str


class Scope:
    """Variables of one frame, with the enclosing frame as parent."""

    def __init__(self, values: dict[str, Any] | None = None, parent: Scope | None = None) -> None:
        self.values = values if values is not None else {}
        self.parent = parent
        self.global_names: set[str] = set()  # names this frame declared ``global``

    def root(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def lookup(self, name: str) -> tuple[bool, Any]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return True, scope.values[name]
            scope = scope.parent
        return False, None


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_CONSTANT_CALLS = ("int", "float")
_PURE_DECORATORS = ("cache", "lru_cache", "functools.cache", "functools.lru_cache", "dataclass", "staticmethod")
_RECORD_BASES = ("NamedTuple", "typing.NamedTuple")


MAX_ITEMS = 100_000  # longest sequence a table file may build (range, repetition)
MAX_BITS = 1 << 16  # largest integer, in bits


def _too_big(op: Callable[[Any, Any], Any], left: Any, right: Any) -> bool:
    """Whether ``left op right`` would build a huge number or sequence (a file cannot make us hang)."""
    if op is operator.mul:
        if isinstance(left, (str, tuple, list)) and isinstance(right, int):
            return len(left) * right > MAX_ITEMS
        return False
    if not (_is_number(left) and _is_number(right)):
        return False
    if op is operator.lshift:
        return right > MAX_BITS
    if isinstance(left, float) or isinstance(right, float):
        return False  # float power overflows to an error, it does not hang
    return right > 0 and max(1, abs(left).bit_length()) * right > MAX_BITS


def _range(*args: int) -> list[int]:
    if len(range(*args)) > MAX_ITEMS:
        raise ValueError(f"range{args} is longer than {MAX_ITEMS}")
    return list(range(*args))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _symbolic_min_max(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        items = args[0] if len(args) == 1 else args
        items = list(items)
        if any(isinstance(v, Symbol) for v in items):
            return Symbol(f"{name}({','.join(str(v) for v in items)})")
        return func(items)

    return call


def _isinstance(value: Any, kinds: Any) -> bool:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    for kind in kinds:
        if isinstance(kind, RecordType) and isinstance(value, Record) and value.type == kind:
            return True
        if kind in (int, float, str, bool, tuple, list, dict) and isinstance(value, kind):
            return True
    return False


BUILTINS: dict[str, Any] = {
    "int": int,
    "float": float,
    "bool": bool,
    "str": str,
    "min": _symbolic_min_max("min", min),
    "max": _symbolic_min_max("max", max),
    "range": _range,
    "len": len,
    "abs": abs,
    "round": round,
    "isinstance": _isinstance,
    "tuple": tuple,
    "list": list,
    "dict": dict,
    "set": set,
    "frozenset": frozenset,
    "sorted": sorted,
    "zip": lambda *a: list(zip(*a, strict=False)),
    "enumerate": lambda a, start=0: list(enumerate(a, start)),
    "all": all,
    "any": any,
    "sum": sum,
    "None": None,
    "True": True,
    "False": False,
}
_METHODS = {
    dict: ("get", "items", "keys", "values", "copy"),
    list: ("index", "count", "copy"),
    tuple: ("index", "count"),
    str: ("startswith", "endswith"),
}


class Interpreter:
    """Evaluates one module's AST; ``globals`` holds what its top level bound."""

    def __init__(
        self,
        source: str,
        filename: str,
        *,
        restricted: bool = False,
        fakes: Mapping[str, Any] | None = None,
    ) -> None:
        self.filename = filename
        self.restricted = restricted
        self.fakes = dict(fakes or {})
        try:
            self.tree = ast.parse(source, filename)
        except SyntaxError as err:
            raise Unsupported(f"{filename}:{err.lineno}: not valid Python: {err.msg}") from None
        self.globals = Scope({})
        self.lines: dict[str, int] = {}  # name -> line of its (last) top-level binding
        self.steps = 0
        self.calls: list[int] = []

    # ------------------------------------------------------------ errors

    def fail(self, node: ast.AST | None, message: str) -> Unsupported:
        line = getattr(node, "lineno", "?")
        return Unsupported(f"{self.filename}:{line}: {message}")

    def _construct(self, node: ast.AST) -> str:
        try:
            text = ast.unparse(node)
        except Exception:  # pragma: no cover - unparse handles every node ast.parse makes
            text = type(node).__name__
        text = text.splitlines()[0] if text else type(node).__name__
        return f"{type(node).__name__} '{text[:80]}'"

    def _tick(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise self.fail(node, f"gave up after {MAX_STEPS} evaluation steps; is this a table?")

    # ------------------------------------------------------------ module

    def run_module(self, skip_failures: bool = False) -> None:
        """Bind every top-level name; with ``skip_failures``, a binding that cannot be evaluated is left out."""
        for stmt in self.tree.body:
            try:
                self.exec_stmt(stmt, self.globals, top=True)
            except Raised:
                raise
            except Unsupported:
                if not skip_failures:
                    raise
                for name in _bound_names(stmt):
                    self.globals.values.pop(name, None)
            except _Return:
                raise self.fail(stmt, "'return' outside a function") from None

    def exec_block(self, body: list[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            self.exec_stmt(stmt, scope)

    def exec_stmt(self, stmt: ast.stmt, scope: Scope, top: bool = False) -> None:
        self._tick(stmt)
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                return  # docstring
            self.eval(stmt.value, scope)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    raise self.fail(stmt, "'import *' hides which names exist")
                module = getattr(stmt, "module", None) or ""
                full = f"{module}.{alias.name}" if module else alias.name
                bound = alias.asname or alias.name.split(".")[0]
                fake = self.fakes.get(full, self.fakes.get(alias.name))
                scope.values[bound] = fake if fake is not None else Symbol(full if alias.asname or module else bound)
                self.lines[bound] = stmt.lineno
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, scope)
            for target in stmt.targets:
                self.assign(target, value, scope)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, scope), scope)
        elif isinstance(stmt, ast.AugAssign) and not self.restricted:
            op = _BINOPS.get(type(stmt.op))
            if op is None or not isinstance(stmt.target, ast.Name):
                raise self.fail(stmt, f"unsupported construct {self._construct(stmt)}")
            self.assign(
                stmt.target, self.binop(stmt, op, self.eval(stmt.target, scope), self.eval(stmt.value, scope)), scope
            )
        elif isinstance(stmt, ast.FunctionDef):
            for decorator in stmt.decorator_list:
                name = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
                if name not in _PURE_DECORATORS:
                    raise self.fail(stmt, f"decorator '@{name}' on {stmt.name}() is not understood")
            scope.values[stmt.name] = Function(stmt, scope, stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            scope.values[stmt.name] = self.class_def(stmt, scope)
        elif isinstance(stmt, ast.Return) and not self.restricted:
            raise _Return(None if stmt.value is None else self.eval(stmt.value, scope))
        elif isinstance(stmt, ast.If) and not self.restricted:
            self.exec_block(stmt.body if self.eval(stmt.test, scope) else stmt.orelse, scope)
        elif isinstance(stmt, ast.For) and not self.restricted and not stmt.orelse:
            for item in self._iterable(stmt.iter, scope):
                self.assign(stmt.target, item, scope)
                self.exec_block(stmt.body, scope)
        elif isinstance(stmt, ast.Assert) and not self.restricted:
            if not self.eval(stmt.test, scope):
                raise Raised(
                    "AssertionError", f"{self.filename}:{stmt.lineno}: assert failed: {ast.unparse(stmt.test)}"
                )
        elif isinstance(stmt, ast.Raise) and not self.restricted:
            what = ast.unparse(stmt.exc) if stmt.exc is not None else "raise"
            raise Raised(what.split("(")[0], f"{self.filename}:{stmt.lineno}: the file raises {what[:80]}")
        elif isinstance(stmt, ast.Global):
            scope.global_names.update(stmt.names)
        elif isinstance(stmt, ast.Pass):
            return
        else:
            raise self.fail(stmt, f"unsupported construct {self._construct(stmt)}")
        if top:
            for name in _bound_names(stmt):
                self.lines[name] = stmt.lineno

    def class_def(self, stmt: ast.ClassDef, scope: Scope) -> Any:
        bases = [ast.unparse(b) for b in stmt.bases]
        decorators = [ast.unparse(d) for d in stmt.decorator_list]
        is_record = any(b in _RECORD_BASES for b in bases) or any(d.startswith("dataclass") for d in decorators)
        if not is_record:
            return Symbol(stmt.name)  # an enum or a class with behaviour: its attributes stay names
        fields: list[str] = []
        defaults: dict[str, Any] = {}
        for item in stmt.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                fields.append(item.target.id)
                if item.value is not None:
                    defaults[item.target.id] = self.eval(item.value, scope)
        return RecordType(stmt.name, tuple(fields), defaults)

    def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
        if isinstance(target, ast.Name):
            (scope.root() if target.id in scope.global_names else scope).values[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = list(value)
            if len(items) != len(target.elts):
                raise self.fail(target, f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for sub, item in zip(target.elts, items, strict=True):
                self.assign(sub, item, scope)
        elif isinstance(target, ast.Subscript) and not self.restricted:
            container = self.eval(target.value, scope)
            if not isinstance(container, dict):
                raise self.fail(target, f"item assignment into {type(container).__name__}")
            container[self.eval(target.slice, scope)] = value
        else:
            raise self.fail(target, f"unsupported assignment target {self._construct(target)}")

    # ------------------------------------------------------------ expressions

    def eval(self, node: ast.expr, scope: Scope) -> Any:
        self._tick(node)
        method = getattr(self, f"_eval_{type(node).__name__}", None)
        if method is None:
            raise self.fail(node, f"unsupported construct {self._construct(node)}")
        return method(node, scope)

    def _eval_Constant(self, node: ast.Constant, scope: Scope) -> Any:
        return node.value

    def _eval_Name(self, node: ast.Name, scope: Scope) -> Any:
        found, value = scope.lookup(node.id)
        if found:
            return value
        if node.id in BUILTINS and (not self.restricted or node.id in (*_CONSTANT_CALLS, "None", "True", "False")):
            return BUILTINS[node.id]
        raise self.fail(node, f"name '{node.id}' is not bound to a value the evaluator knows")

    def binop(self, node: ast.AST, op: Callable[[Any, Any], Any], left: Any, right: Any) -> Any:
        if isinstance(left, Symbol) or isinstance(right, Symbol):
            raise self.fail(node, f"arithmetic on the opaque value {left if isinstance(left, Symbol) else right}")
        ok = (_is_number(left) and _is_number(right)) or (
            op in (operator.add, operator.mul) and isinstance(left, (str, tuple, list))
        )
        if not ok:
            raise self.fail(node, f"arithmetic on {type(left).__name__} and {type(right).__name__}")
        if op in (operator.lshift, operator.pow, operator.mul) and _too_big(op, left, right):
            raise self.fail(node, "result too large for a table value")
        try:
            return op(left, right)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError) as err:
            raise self.fail(node, f"{type(err).__name__}: {err}") from None

    def _eval_BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"unsupported operator {type(node.op).__name__}")
        return self.binop(node, op, self.eval(node.left, scope), self.eval(node.right, scope))

    def _eval_UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not) and not self.restricted:
            return not value
        if isinstance(node.op, (ast.USub, ast.UAdd)) and _is_number(value):
            return -value if isinstance(node.op, ast.USub) else value
        raise self.fail(node, f"unsupported construct {self._construct(node)}")

    def _eval_BoolOp(self, node: ast.BoolOp, scope: Scope) -> Any:
        self._no_restricted(node)
        value: Any = None
        for item in node.values:
            value = self.eval(item, scope)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def _eval_Compare(self, node: ast.Compare, scope: Scope) -> bool:
        self._no_restricted(node)
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, scope)
            opaque = isinstance(left, Symbol) or isinstance(right, Symbol)
            if opaque and not isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                raise self.fail(node, f"comparison with the opaque value in {self._construct(node)}")
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError as err:
                raise self.fail(node, f"{err}") from None
            left = right
        return True

    def _eval_IfExp(self, node: ast.IfExp, scope: Scope) -> Any:
        self._no_restricted(node)
        return self.eval(node.body if self.eval(node.test, scope) else node.orelse, scope)

    def _elements(self, nodes: list[ast.expr], scope: Scope) -> list[Any]:
        out: list[Any] = []
        for item in nodes:
            if isinstance(item, ast.Starred):
                out.extend(self.eval(item.value, scope))
            else:
                out.append(self.eval(item, scope))
        return out

    def _eval_Tuple(self, node: ast.Tuple, scope: Scope) -> tuple[Any, ...]:
        return tuple(self._elements(node.elts, scope))

    def _eval_List(self, node: ast.List, scope: Scope) -> list[Any]:
        return self._elements(node.elts, scope)

    def _eval_Set(self, node: ast.Set, scope: Scope) -> set[Any]:
        return set(self._elements(node.elts, scope))

    def _eval_Dict(self, node: ast.Dict, scope: Scope) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(self.eval(value, scope))
            else:
                out[self.eval(key, scope)] = self.eval(value, scope)
        return out

    def _no_restricted(self, node: ast.AST) -> None:
        if self.restricted:
            raise self.fail(node, f"{self._construct(node)} is not a constant expression")

    def _iterable(self, node: ast.expr, scope: Scope) -> list[Any]:
        value = self.eval(node, scope)
        if isinstance(value, (list, tuple, set, frozenset, dict, Record)):
            return list(value)
        raise self.fail(node, f"cannot iterate over {type(value).__name__}")

    def _comprehension(self, node: Any, scope: Scope, emit: Callable[[Scope], None]) -> None:
        self._no_restricted(node)

        def loop(index: int, inner: Scope) -> None:
            if index == len(node.generators):
                emit(inner)
                return
            gen = node.generators[index]
            for item in self._iterable(gen.iter, inner):
                frame = Scope({}, inner)
                self.assign(gen.target, item, frame)
                if all(self.eval(cond, frame) for cond in gen.ifs):
                    loop(index + 1, frame)

        loop(0, scope)

    def _eval_ListComp(self, node: ast.ListComp, scope: Scope) -> list[Any]:
        out: list[Any] = []
        self._comprehension(node, scope, lambda s: out.append(self.eval(node.elt, s)))
        return out

    _eval_GeneratorExp = _eval_ListComp

    def _eval_SetComp(self, node: ast.SetComp, scope: Scope) -> set[Any]:
        return set(self._eval_ListComp(node, scope))  # type: ignore[arg-type]

    def _eval_DictComp(self, node: ast.DictComp, scope: Scope) -> dict[Any, Any]:
        out: dict[Any, Any] = {}

        def emit(s: Scope) -> None:
            out[self.eval(node.key, s)] = self.eval(node.value, s)

        self._comprehension(node, scope, emit)
        return out

    def _eval_Lambda(self, node: ast.Lambda, scope: Scope) -> Function:
        self._no_restricted(node)
        return Function(node, scope, "<lambda>")

    def _eval_Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
        container = self.eval(node.value, scope)
        if isinstance(node.slice, ast.Slice):
            raise self.fail(node, "slices are not supported")
        key = self.eval(node.slice, scope)
        if isinstance(container, (dict, list, tuple, Record)):
            try:
                return container[key]
            except KeyError:
                raise Raised(
                    "KeyError", f"{self.filename}:{node.lineno}: KeyError {key!r} in {ast.unparse(node)}"
                ) from None
            except (IndexError, TypeError) as err:
                raise self.fail(node, f"{type(err).__name__}: {err}") from None
        if isinstance(container, Symbol) or container in (tuple, list, dict, set, frozenset, type):
            name = getattr(container, "__name__", container)
            return Symbol(f"{name}[{key}]")  # a type annotation such as Optional[int] or tuple[Row, ...]
        raise self.fail(node, f"cannot index {type(container).__name__}")

    def _eval_Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        owner = self.eval(node.value, scope)
        name = node.attr
        if isinstance(owner, Symbol):
            path = f"{owner}.{name}"
            return self.fakes.get(path, Symbol(path))
        if isinstance(owner, Record):
            if name in owner.type.fields:
                return owner.get(name)
            if name in ("_replace", "_asdict"):
                return (owner, name)
        if isinstance(owner, Mapping) and not isinstance(owner, dict) and name in owner:
            return owner[name]  # a fake namespace
        for kind, methods in _METHODS.items():
            if isinstance(owner, kind) and name in methods:
                return getattr(owner, name)
        raise self.fail(node, f"attribute '{name}' of {type(owner).__name__} is not supported")

    def _eval_Call(self, node: ast.Call, scope: Scope) -> Any:
        func = self.eval(node.func, scope)
        if self.restricted and func not in (int, float):
            raise self.fail(node, f"call {self._construct(node)} is not a constant expression")
        args = self._elements(node.args, scope)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value, scope))
            else:
                kwargs[kw.arg] = self.eval(kw.value, scope)
        self.calls.append(node.lineno)
        if len(self.calls) > MAX_DEPTH:
            raise self.fail(node, f"calls nested deeper than {MAX_DEPTH}")
        try:
            return self.call(func, args, kwargs, node)
        finally:
            self.calls.pop()

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None = None) -> Any:
        """Call ``func`` (a function of the file, a record type, a fake or a pure builtin)."""
        if isinstance(func, Function):
            return self._call_function(func, args, kwargs, node)
        if isinstance(func, RecordType):
            return self._construct_record(func, args, kwargs, node)
        if isinstance(func, tuple) and len(func) == 2 and isinstance(func[0], Record):
            record, method = func
            if method == "_asdict":
                return dict(zip(record.type.fields, record.values, strict=True))
            values = dict(zip(record.type.fields, record.values, strict=True))
            unknown = set(kwargs) - set(values)
            if unknown or args:
                raise self.fail(node, f"_replace() with unknown fields {sorted(unknown)}")
            values.update(kwargs)
            return Record(record.type, tuple(values.values()), record.lines)
        if isinstance(func, Symbol):
            raise self.fail(node, f"calls '{func}', which comes from outside the file and is not interpreted")
        if callable(func) and (func in BUILTINS.values() or func in self.fakes.values() or _is_bound_method(func)):
            try:
                return func(*args, **kwargs)
            except Unsupported:
                raise
            except KeyError as err:
                raise Raised("KeyError", f"{self.filename}:{getattr(node, 'lineno', '?')}: KeyError {err}") from None
            except Exception as err:
                raise self.fail(node, f"{type(err).__name__}: {err}") from None
        raise self.fail(node, f"{func!r} is not callable here")

    def _construct_record(
        self, kind: RecordType, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None
    ) -> Record:
        if len(args) > len(kind.fields):
            raise self.fail(node, f"{kind.name}() takes {len(kind.fields)} fields, got {len(args)}")
        values = dict(zip(kind.fields, args, strict=False))
        for key, value in kwargs.items():
            if key not in kind.fields or key in values:
                raise self.fail(node, f"{kind.name}() got an unexpected or repeated field {key!r}")
            values[key] = value
        for name in kind.fields:
            if name not in values:
                if name not in kind.defaults:
                    raise self.fail(node, f"{kind.name}() is missing field {name!r}")
                values[name] = kind.defaults[name]
        return Record(kind, tuple(values[name] for name in kind.fields), tuple(self.calls))

    def _call_function(self, func: Function, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None) -> Any:
        spec = func.node.args
        frame = Scope({}, func.scope)
        positional = [*spec.posonlyargs, *spec.args]
        defaults = dict(
            zip([a.arg for a in positional[len(positional) - len(spec.defaults) :]], spec.defaults, strict=True)
        )
        for param, value in zip(positional, args, strict=False):
            frame.values[param.arg] = value
        extra = args[len(positional) :]
        if extra:
            if spec.vararg is None:
                raise self.fail(node, f"{func.name}() takes {len(positional)} positional arguments, got {len(args)}")
            frame.values[spec.vararg.arg] = tuple(extra)
        elif spec.vararg is not None:
            frame.values[spec.vararg.arg] = ()
        rest: dict[str, Any] = {}
        names = {a.arg for a in positional} | {a.arg for a in spec.kwonlyargs}
        for key, value in kwargs.items():
            if key in names and key not in frame.values:
                frame.values[key] = value
            elif spec.kwarg is not None:
                rest[key] = value
            else:
                raise self.fail(node, f"{func.name}() got an unexpected or repeated argument {key!r}")
        if spec.kwarg is not None:
            frame.values[spec.kwarg.arg] = rest
        for param in positional:
            if param.arg not in frame.values:
                if param.arg not in defaults:
                    raise self.fail(node, f"{func.name}() is missing argument {param.arg!r}")
                frame.values[param.arg] = self.eval(defaults[param.arg], func.scope)
        for param, default in zip(spec.kwonlyargs, spec.kw_defaults, strict=True):
            if param.arg not in frame.values:
                if default is None:
                    raise self.fail(node, f"{func.name}() is missing keyword argument {param.arg!r}")
                frame.values[param.arg] = self.eval(default, func.scope)
        if isinstance(func.node, ast.Lambda):
            return self.eval(func.node.body, frame)
        try:
            self.exec_block(func.node.body, frame)
        except _Return as ret:
            return ret.value
        return None


def _is_bound_method(func: Any) -> bool:
    owner = getattr(func, "__self__", None)
    return isinstance(owner, (dict, list, tuple, str)) and getattr(func, "__name__", "") in _METHODS[type(owner)]


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return [stmt.name]
    return []


def constants(source: str, filename: str) -> tuple[dict[str, Any], dict[str, int], ast.Module]:
    """The module's top-level constant bindings (and class-level ones, as ``Class.NAME``), their lines, the AST.

    A binding whose value is not a constant expression is left out; using
    such a name later is an ``Unsupported`` error naming it.
    """
    interp = Interpreter(source, filename, restricted=True)
    for stmt in interp.tree.body:
        body = stmt.body if isinstance(stmt, ast.ClassDef) else [stmt]
        prefix = f"{stmt.name}." if isinstance(stmt, ast.ClassDef) else ""
        for item in body:
            if not isinstance(item, (ast.Assign, ast.AnnAssign)):
                continue
            try:
                value = interp.eval(item.value, interp.globals) if item.value is not None else None
            except Raised:
                raise
            except Unsupported:
                continue
            for name in _bound_names(item):
                key = prefix + name
                if prefix:
                    interp.lines[key] = item.lineno
                    interp.globals.values.setdefault("__class_values__", {})[key] = value
                else:
                    interp.globals.values[name] = value
                    interp.lines[name] = item.lineno
    values = dict(interp.globals.values)
    values.update(values.pop("__class_values__", {}))
    return values, interp.lines, interp.tree
