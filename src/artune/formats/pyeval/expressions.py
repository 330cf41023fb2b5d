"""The expression evaluator: what ``constants`` needs for vLLM's tables, and what statements build on.

``Evaluator.eval`` walks one expression node under a ``Scope``. Every step
counts against ``MAX_STEPS`` and every call against ``MAX_DEPTH``; an
expression outside the subset is an ``Unsupported`` error naming the file,
the line and the construct. ``restricted=True`` allows constant expressions
only: no calls except ``int``/``float``, no lambdas, no comprehensions, no
comparisons or boolean logic.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from artune.errors import OutsideCall, Raised, Unsupported
from artune.formats import limits
from artune.formats.pyeval.values import (
    BUILTINS,
    CONSTANT_NAMES,
    MAX_CHARS,
    METHODS,
    BoundMethod,
    ClassValue,
    Function,
    Generator,
    Namespace,
    Native,
    Opaque,
    Record,
    RecordType,
    Scope,
    Super,
    Symbol,
    is_number,
    is_pure_method,
    oversized,
    size_refusal,
    spec_refusal,
    text_size,
    too_big,
)

MAX_STEPS = 2_000_000
MAX_BUILT = 20_000_000  # items and characters of the strings, lists and dicts built, all together
MAX_DEPTH = 64
_BUILTIN_IDS = frozenset(id(v) for v in BUILTINS.values() if callable(v))
_VIEWS = (type({}.items()), type({}.keys()), type({}.values()))  # what dict.items() & co. return

BINOPS: dict[type, Callable[[Any, Any], Any]] = {
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
_OPAQUE_COMPARE = (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)  # what an opaque Symbol supports


@functools.lru_cache(maxsize=64)
def parse(source: str, filename: str) -> ast.Module:
    """The module's AST (parsed once per text: readers interpret a file many times, never changing its tree);
    ``Unsupported`` naming the line when it is not valid Python."""
    try:
        return ast.parse(source, filename)
    except SyntaxError as err:
        raise Unsupported(f"{filename}:{err.lineno}: not valid Python: {err.msg}") from None
    except (MemoryError, RecursionError, SystemError) as err:  # CPython's parser on 200,000 nested operators
        raise Unsupported(f"{filename}: nested too deeply to parse ({type(err).__name__})") from None


class Evaluator:
    """Evaluates expressions of one file; ``fakes`` stand in for names from outside it (``torch.cuda...``)."""

    def __init__(self, filename: str, *, restricted: bool = False, fakes: Mapping[str, Any] | None = None) -> None:
        self.filename = filename
        limits.reading(filename)
        self.restricted = restricted
        self.fakes = dict(fakes or {})
        self.steps = 0
        self.built = 0  # items built so far (``sized``)
        self.calls: list[int] = []  # lines of the calls in progress, outermost first
        self.functions: list[str] = []  # the file's functions in progress, outermost first
        self._memo: dict[tuple[Any, ...], Any] = {}  # what each ``@cache`` function answered, by its arguments
        #: where a reader sets it, every number a comparison met (``n <= 64 * KB`` adds ``n`` and 65536): the
        #: values an answer can change at, however the code computed them
        self.compared: set[int | float] | None = None
        #: every function of a file that ran, by (file, name): what a reading relied on (its fingerprints)
        self.ran: dict[tuple[str, str], ast.AST] = {}
        #: where a reader sets it, a call of a name from outside the file that no fake answers gives an
        #: ``Opaque`` value instead of an ``OutsideCall`` error, as do its attributes and arithmetic on it: the
        #: reading then fails only where a decision needs what the evaluator does not know
        self.opaque_calls = False
        self.unbound: dict[str, str] = {}  # top-level names left unbound, with why (Interpreter.run_module)
        self.frames: list[tuple[Function, Scope]] = []  # the file's functions in progress, with their frames
        self._methods: dict[type, Any] = {}  # node type -> the method that evaluates it (looked up once)

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

    def _no_restricted(self, node: ast.AST) -> None:
        if self.restricted:
            raise self.fail(node, f"{self._construct(node)} is not a constant expression")

    def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
        """Bind ``value`` to a name, a tuple of names, or (unrestricted) a dict item."""
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
            key = self.eval(target.slice, scope)
            outside = isinstance(container, Namespace) and "__getitem__" in container.values
            if isinstance(container, Opaque) or outside:
                return  # an item of an object from outside the files (a buffer): nothing the file reads back
            if not (isinstance(container, dict) or (isinstance(container, list) and type(key) is int)):
                raise self.fail(target, f"item assignment into {type(container).__name__}")
            try:
                container[key] = value
            except IndexError as err:
                raise Raised("IndexError", str(err), f"{self.filename}:{target.lineno}") from None
        elif isinstance(target, ast.Attribute) and not self.restricted:
            owner = self.eval(target.value, scope)
            if not isinstance(owner, Namespace):
                raise self.fail(target, f"attribute assignment into {type(owner).__name__}")
            owner.values[target.attr] = value
        else:
            raise self.fail(target, f"unsupported assignment target {self._construct(target)}")

    def eval(self, node: ast.expr, scope: Scope) -> Any:
        """The value of ``node`` in ``scope``."""
        self.steps += 1  # _tick, inlined: this runs for every node
        if self.steps > MAX_STEPS:
            self._tick(node)
        kind = type(node)
        method = self._methods.get(kind)
        if method is None:
            method = self._methods[kind] = getattr(self, f"_eval_{kind.__name__}", None)
        if method is None:
            raise self.fail(node, f"unsupported construct {self._construct(node)}")
        try:
            return method(node, scope)
        except TypeError as err:  # the file's values misused (an unhashable key, unpacking an int)
            raise self.fail(node, f"TypeError: {err}") from None
        except RecursionError:  # expressions or calls nested deeper than Python's own stack allows
            raise self.fail(node, "nested too deeply to evaluate") from None
        except Unsupported as err:
            if type(err) is Unsupported and not str(err).startswith(f"{self.filename}:"):
                raise self.fail(node, str(err)) from None  # a value's own refusal (an opaque truth), placed
            raise

    def _eval_Constant(self, node: ast.Constant, scope: Scope) -> Any:
        return node.value

    def _eval_Name(self, node: ast.Name, scope: Scope) -> Any:
        found, value = scope.lookup(node.id)
        if found:
            return value
        if node.id in BUILTINS and (not self.restricted or node.id in CONSTANT_NAMES):
            return BUILTINS[node.id]
        why = f" ({self.unbound[node.id]})" if node.id in self.unbound else ""
        raise self.fail(node, f"name '{node.id}' is not bound to a value the evaluator knows{why}")

    def binop(self, node: ast.AST, op: Callable[[Any, Any], Any], left: Any, right: Any) -> Any:
        """``left op right`` on numbers (or str/tuple/list ``+ *``), bounded in size."""
        if isinstance(left, Opaque) or isinstance(right, Opaque):
            return Opaque(f"({left} {type(getattr(node, 'op', node)).__name__} {right})")
        if isinstance(left, Symbol) or isinstance(right, Symbol):
            raise self.fail(node, f"arithmetic on the opaque value {left if isinstance(left, Symbol) else right}")
        ok = (is_number(left) and is_number(right)) or (
            op in (operator.add, operator.mul) and isinstance(left, (str, tuple, list))
        )
        if not ok:
            message = f"arithmetic on {type(left).__name__} and {type(right).__name__}"
            if _none_misused((left, right)):
                raise Raised("TypeError", message, f"{self.filename}:{getattr(node, 'lineno', '?')}")
            raise self.fail(node, message)
        if op in (operator.lshift, operator.pow, operator.mul) and too_big(op, left, right):
            raise self.fail(node, "result too large for a table value")
        try:
            value = op(left, right)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError) as err:
            raise self.fail(node, f"{type(err).__name__}: {err}") from None
        return self.sized(node, value)

    def sized(self, node: ast.AST | None, value: Any) -> Any:
        """``value``, where it is no larger than a table file may build (``values.oversized``), and where all
        that the evaluator built so far stays within ``MAX_BUILT`` items (many lists that are each small)."""
        why = oversized(value)
        if why:
            raise self.fail(node, f"result too large for a table value: {why}")
        if isinstance(value, (str, list, tuple, dict, set)):
            self.built += len(value)
            if self.built > MAX_BUILT:
                raise self.fail(node, f"gave up after building {MAX_BUILT} items; is this a table?")
        return value

    def _eval_BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"unsupported operator {type(node.op).__name__}")
        return self.binop(node, op, self.eval(node.left, scope), self.eval(node.right, scope))

    def _eval_UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not) and not self.restricted:
            return not value
        if isinstance(node.op, (ast.USub, ast.UAdd)) and is_number(value):
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)) and isinstance(value, Opaque):
            return Opaque(f"{type(node.op).__name__}({value})")
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
            if isinstance(left, Opaque) or isinstance(right, Opaque):
                raise self.fail(node, f"comparison with an opaque value in {self._construct(node)}")
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, Namespace) and "__contains__" in right.values:
                inside = bool(self.call(right.values["__contains__"], [left], {}, node))  # a stand-in's ``in``
                if inside != isinstance(op, ast.In):
                    return False
                left = right
                continue
            opaque = isinstance(left, Symbol) or isinstance(right, Symbol)
            if opaque and not isinstance(op, _OPAQUE_COMPARE):
                raise self.fail(node, f"comparison with the opaque value in {self._construct(node)}")
            if self.compared is not None:
                self.compared.update(v for v in (left, right) if is_number(v))
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

    def iterable(self, node: ast.expr, scope: Scope) -> list[Any]:
        """The items of a container ``node`` evaluates to (what ``for`` and comprehensions loop over)."""
        value = self.eval(node, scope)
        if isinstance(value, (list, tuple, set, frozenset, dict, Record, str, *_VIEWS)):
            return list(value)
        raise self.fail(node, f"cannot iterate over {type(value).__name__}")

    def _comprehension(self, node: Any, scope: Scope, emit: Callable[[Scope], None]) -> None:
        self._no_restricted(node)

        def loop(index: int, inner: Scope) -> None:
            if index == len(node.generators):
                emit(inner)
                return
            gen = node.generators[index]
            for item in self.iterable(gen.iter, inner):
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

    def _eval_NamedExpr(self, node: ast.NamedExpr, scope: Scope) -> Any:
        self._no_restricted(node)
        value = self.eval(node.value, scope)
        self.assign(node.target, value, scope)
        return value

    def _eval_Lambda(self, node: ast.Lambda, scope: Scope) -> Function:
        self._no_restricted(node)
        return Function(node, scope, "<lambda>", self.filename)

    def _eval_Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
        container = self.eval(node.value, scope)
        if isinstance(node.slice, ast.Slice):
            return self._slice(node, container, node.slice, scope)
        key = self.eval(node.slice, scope)
        if isinstance(container, Opaque):
            return Opaque(f"{container}[{key}]")
        if isinstance(container, Namespace) and "__getitem__" in container.values:
            return self.call(container.values["__getitem__"], [key], {}, node)
        if isinstance(container, (dict, list, tuple, Record)):
            try:
                return container[key]
            except KeyError:
                raise Raised(
                    "KeyError", f"KeyError {key!r} in {ast.unparse(node)}", f"{self.filename}:{node.lineno}"
                ) from None
            except (IndexError, TypeError) as err:
                raise self.fail(node, f"{type(err).__name__}: {err}") from None
        if isinstance(container, Symbol) or container in (tuple, list, dict, set, frozenset, type):
            name = getattr(container, "__name__", container)
            return Symbol(f"{name}[{key}]")  # a type annotation such as Optional[int] or tuple[Row, ...]
        raise self.fail(node, f"cannot index {type(container).__name__}")

    def _slice(self, node: ast.Subscript, container: Any, part: ast.Slice, scope: Scope) -> Any:
        """``container[lower:upper:step]`` of a list, tuple or string; opaque of an opaque value."""
        bounds = [None if p is None else self.eval(p, scope) for p in (part.lower, part.upper, part.step)]
        if isinstance(container, Symbol) and self.opaque_calls:
            return Opaque(f"{container}[{ast.unparse(part)}]")
        if isinstance(container, Namespace) and "__getitem__" in container.values:
            return self.call(container.values["__getitem__"], [slice(*bounds)], {}, node)
        if isinstance(container, (list, tuple, str)) and all(b is None or type(b) is int for b in bounds):
            return container[slice(*bounds)]
        raise self.fail(node, f"slice of {type(container).__name__} is not supported")

    def _eval_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> str:
        self._no_restricted(node)
        parts = [self.eval(part, scope) for part in node.values]
        if text_size(parts) > MAX_CHARS:
            raise self.fail(node, f"result too large for a table value: an f-string over {MAX_CHARS} characters")
        return self.sized(node, "".join(str(part) for part in parts))

    def _eval_FormattedValue(self, node: ast.FormattedValue, scope: Scope) -> str:
        value = self.eval(node.value, scope)
        spec = "" if node.format_spec is None else self.eval(node.format_spec, scope)
        why = spec_refusal(str(spec)) or (
            f"a value over {MAX_CHARS} characters" if text_size(value) > MAX_CHARS else ""
        )
        if why:
            raise self.fail(node, f"result too large for a table value: {why}")
        if node.conversion == ord("r"):
            value = repr(value)
        elif node.conversion in (ord("s"), ord("a")) or not isinstance(value, (int, float, str)):
            value = str(value)
        try:
            return format(value, spec)
        except ValueError as err:
            raise self.fail(node, f"format spec {spec!r}: {err}") from None

    def _eval_Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        owner = self.eval(node.value, scope)
        name = node.attr
        if type(owner) is Namespace and name in owner.values:  # the common case first: an attribute set
            return owner.values[name]
        if isinstance(owner, Opaque):
            return Opaque(f"{owner}.{name}")
        if isinstance(owner, Symbol):
            path = f"{owner}.{name}"
            return self.fakes.get(path, Symbol(path))
        if isinstance(owner, ClassValue):
            found, value = owner.lookup(name)
            if found:
                return value
            raise self.fail(node, f"class {owner.name} has no attribute '{name}'")
        if isinstance(owner, Super):
            found, value = owner.instance.cls.lookup(name, after=owner.cls) if owner.instance.cls else (False, None)
            if found and isinstance(value, Function) and not value.static:
                return BoundMethod(value, owner.instance)
            if found:
                return value
            raise self.fail(node, f"super() of {owner.cls.name} has no attribute '{name}'")
        if isinstance(owner, Record):
            if name in owner.type.fields:
                return owner.get(name)
            if name in ("_replace", "_asdict"):
                return (owner, name)
            method = owner.type.methods.get(name)
            if method is not None:
                bound = BoundMethod(method, owner)
                return self.call(bound, [], {}, node) if name in owner.type.properties else bound
        if isinstance(owner, Namespace):
            found, value = owner.attribute(name)
            if found:
                if isinstance(value, BoundMethod) and value.func.prop:
                    return self.call(value, [], {}, node)
                return value
            hook = owner.values.get("__getattr__")  # a module's __getattr__ (PEP 562), as envs.py defines one
            if isinstance(hook, (Function, Native)):
                return self.call(hook, [name], {}, node)
            raise self.fail(node, f"{owner!r} has no attribute '{name}' (not set by the code read so far)")
        if isinstance(owner, Mapping) and not isinstance(owner, dict) and name in owner:
            return owner[name]  # a fake namespace
        for kind, methods in METHODS.items():
            if isinstance(owner, kind) and name in methods:
                return getattr(owner, name)
        if owner is None:
            where = f"{self.filename}:{node.lineno}"
            raise Raised("AttributeError", f"'NoneType' object has no attribute {name!r}", where)
        if self.opaque_calls:
            return Opaque(f"{type(owner).__name__}.{name}")  # a method of a value the evaluator does not model
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
        if isinstance(func, Opaque):
            return Opaque(f"{func}()")
        if isinstance(func, BoundMethod):
            func, args = func.func, [func.owner, *args]
        if isinstance(func, ClassValue):
            return self._instantiate(func, args, kwargs, node)
        if isinstance(func, Function) and func.context:
            return Generator(func, tuple(args), dict(kwargs))
        if isinstance(func, Function) and func.cached:
            try:
                key = (id(func.node), id(func.scope), tuple(args), tuple(sorted(kwargs.items())))
                hash(key)
            except TypeError:
                raise self.fail(node, f"{func.name}() is cached and its arguments are not hashable") from None
            if key not in self._memo:
                self._memo[key] = self.call(replace(func, cached=False), args, kwargs, node)
            return self._memo[key]
        if isinstance(func, Function):
            try:
                frame = func.bind(args, kwargs, self.eval)
            except ValueError as err:
                raise self.fail(node, str(err)) from None
            caller = self.filename
            if func.filename:
                self.filename = func.filename  # errors inside name the function's own file
                limits.reading(func.filename)
            self.functions.append(func.name)
            self.frames.append((func, frame))
            self.ran.setdefault((self.filename, func.name), func.node)
            try:
                return self.run_body(func, frame)
            finally:
                self.frames.pop()
                self.functions.pop()
                self.filename = caller
                limits.reading(caller)
        if isinstance(func, Native):
            try:
                return func.func(*args, **kwargs)
            except Unsupported:
                raise
            except Exception as err:
                raise self.fail(node, f"{func}: {type(err).__name__}: {err}") from None
        try:
            if isinstance(func, RecordType):
                return func.make(args, kwargs, tuple(self.calls))
            if isinstance(func, tuple) and len(func) == 2 and isinstance(func[0], Record):
                record, method = func
                return record.asdict() if method == "_asdict" else record.replace(args, kwargs)
        except ValueError as err:
            raise self.fail(node, str(err)) from None
        if isinstance(func, Namespace) and "__call__" in func.values:  # an object that answers calls (an enum)
            return self.call(func.values["__call__"], args, kwargs, node)
        if func is super:
            return self._super(node, args)
        if func in (getattr, hasattr):
            return self._getattr(func, args, node)
        if isinstance(func, Symbol) and self.opaque_calls:
            return Opaque(f"{func}()")
        if isinstance(func, Symbol):
            line = getattr(node, "lineno", "?")
            message = (
                f"{self.filename}:{line}: calls '{func}', which comes from outside the file and is not interpreted"
            )
            raise OutsideCall(message, str(func), line)
        builtin = id(func) in _BUILTIN_IDS
        known = builtin or is_pure_method(func) or any(func is v for v in self.fakes.values())
        if callable(func) and known:
            why = size_refusal(func, args, kwargs)
            if why:
                raise self.fail(node, f"result too large for a table value: {why}")
            try:
                value = func(*args, **kwargs)
            except Unsupported as err:
                if type(err) is Unsupported and builtin:
                    raise self.fail(node, str(err)) from None  # a builtin's refusal, at the line that asked
                raise
            except KeyError as err:
                raise Raised("KeyError", f"KeyError {err}", f"{self.filename}:{getattr(node, 'lineno', '?')}") from None
            except TypeError as err:
                if builtin and _none_misused((*args, *kwargs.values())):  # max(None, 4): the file's own error
                    raise Raised("TypeError", str(err), f"{self.filename}:{getattr(node, 'lineno', '?')}") from None
                raise self.fail(node, f"TypeError: {err}") from None
            except Exception as err:
                raise self.fail(node, f"{type(err).__name__}: {err}") from None
            owner = getattr(func, "__self__", None)
            if isinstance(owner, (list, dict, set)):
                self.sized(node, owner)  # a method that grew its list (append, insert) in place
            return self.sized(node, value)
        raise self.fail(node, f"{func!r} is not callable here")

    def _instantiate(self, cls: ClassValue, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None) -> Any:
        """``cls(*args, **kwargs)``: a new instance, its ``__init__`` run."""
        me = cls.instance()
        found, init = cls.lookup("__init__")
        if found and isinstance(init, Function):
            self.call(init, [me, *args], kwargs, node)
        elif args or kwargs:
            raise self.fail(node, f"{cls.name}() takes no arguments")
        return me

    def _super(self, node: ast.AST | None, args: list[Any]) -> Super:
        """Zero-argument ``super()`` in a method: its class and its ``self``."""
        for func, frame in reversed(self.frames):
            if func.owner is not None and not args and isinstance(func.node, ast.FunctionDef) and func.node.args.args:
                me = frame.values.get(func.node.args.args[0].arg)
                if isinstance(me, Namespace):
                    return Super(func.owner, me)
        raise self.fail(node, "super() outside a method of a class the evaluator built")

    def _getattr(self, func: Any, args: list[Any], node: ast.AST | None) -> Any:
        """``getattr(obj, name[, default])`` and ``hasattr(obj, name)`` on what the evaluator models."""
        if len(args) < 2 or not isinstance(args[1], str):
            raise self.fail(node, f"{func.__name__}() needs an object and an attribute name")
        owner, name = args[0], args[1]
        if isinstance(owner, Opaque) or (isinstance(owner, Symbol) and self.opaque_calls):
            return Opaque(f"{func.__name__}({owner}, {name!r})")
        found, value = False, None
        if isinstance(owner, Namespace):
            found, value = owner.attribute(name)
            if not found and "__getattr__" in owner.values:
                found, value = True, self.call(owner.values["__getattr__"], [name], {}, node)
        elif isinstance(owner, ClassValue):
            found, value = owner.lookup(name)
        elif isinstance(owner, Record):
            found, value = name in owner.type.fields, owner.get(name)
        elif isinstance(owner, Symbol):
            path = f"{owner}.{name}"
            found, value = True, self.fakes.get(path, Symbol(path))
        elif owner is None:
            found = False
        else:
            raise self.fail(node, f"{func.__name__}() of {type(owner).__name__} is not supported")
        if func is hasattr:
            return found
        if found:
            return value
        if len(args) > 2:
            return args[2]
        raise Raised("AttributeError", f"no attribute {name!r}", f"{self.filename}:{getattr(node, 'lineno', '?')}")

    def run_body(self, func: Function, frame: Scope) -> Any:
        """The value of a call of ``func`` with its parameters bound in ``frame`` (a lambda's body here)."""
        assert isinstance(func.node, ast.Lambda)  # a ``def`` comes from ``Interpreter``, which runs its body
        return self.eval(func.node.body, frame)


def _none_misused(values: tuple[Any, ...]) -> bool:
    """Whether a TypeError on ``values`` is one Python raises for the file itself: a real ``None`` among
    them and no stand-in (a stand-in's misuse says only that the evaluator does not know the value)."""
    return any(v is None for v in values) and not any(isinstance(v, Symbol) for v in values)
