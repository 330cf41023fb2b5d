"""What the evaluator computes with: opaque symbols, records, functions, scopes, pure builtins.

Size limits live here too: a table file may build numbers and sequences
only up to ``MAX_BITS`` and ``MAX_ITEMS``, so a hostile file cannot make
the reader hang or exhaust memory.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from artune.errors import Unsupported

MAX_ITEMS = 100_000  # longest sequence a table file may build (range, repetition)
MAX_BITS = 1 << 16  # largest integer, in bits
MAX_CHARS = 1 << 20  # longest string a table file may build
MAX_DIGITS = 4096  # the most digits ``round`` may be asked for, either way of the point


@dataclass(frozen=True)
class Symbol:
    """An opaque name from outside the file (an import, ``num_sm``); attributes extend the path."""

    path: str

    def __str__(self) -> str:
        return self.path

    def __bool__(self) -> bool:
        # ``if ops.IS_AVAILABLE:``: an opaque name's truth is unknown; answering "true" would be a silent guess
        raise Unsupported(f"the truth of the opaque value {self.path} is not known to the evaluator")


@dataclass(frozen=True, eq=False)
class Opaque(Symbol):
    """What code from outside the file computed, where nothing stands in for it (an interpreter's
    ``opaque_calls``): it can be stored, passed on, called, indexed and its attributes read (each opaque
    too), but every decision on it (its truth, an equality or order test, ``isinstance``) is ``Unsupported``:
    the place where the reading depends on what the evaluator does not know."""

    # equal only to itself where Python compares objects for its own bookkeeping (``in`` a registry); a
    # comparison the file makes is refused by the evaluator before it gets here
    __eq__ = object.__eq__
    __hash__ = object.__hash__


class Linear(int):
    """An int known as ``scale * n + offset`` of the one quantity ``n`` a reader varies (the message's bytes).

    What the file computes from it by ``+ - * //`` with plain numbers stays
    ``Linear``; every comparison with a plain number adds to ``flips`` the
    ``n`` where its answer can change, wherever it is made (the file, a
    builtin, a reader's stand-in). So a reader learns, from the run itself,
    every size at which the code's answer may change. ``%`` and other
    operations give plain ints.

    ``multiple``: the reader's view that the quantity is a multiple of it, whatever its value (a size asked
    at an exact cut point stands for the aligned messages around it; the catalog's alignment rules answer
    for the others): ``%`` by a divisor of it is 0. ``* k`` keeps the view, ``// k`` divides it where ``k``
    divides it, ``+ c`` drops it.
    """

    scale: Fraction
    offset: Fraction
    flips: set[float]
    multiple: int

    def __new__(
        cls,
        value: int,
        scale: Fraction | int = 1,
        offset: Fraction | int = 0,
        flips: set[float] | None = None,
        multiple: int = 0,
    ) -> Linear:
        made = super().__new__(cls, value)
        made.scale, made.offset = Fraction(scale), Fraction(offset)
        made.flips = flips if flips is not None else set()
        made.multiple = multiple
        return made

    def _made(self, value: int, scale: Fraction, offset: Fraction, multiple: int = 0) -> int:
        return Linear(value, scale, offset, self.flips, multiple) if scale else value

    def __mod__(self, other: Any) -> Any:
        if type(other) is int and other > 0 and self.multiple and self.multiple % other == 0:
            return 0
        return int(self) % (int(other) if isinstance(other, Linear) else other)

    def _record(self, other: object) -> None:
        if isinstance(other, (int, float)) and not isinstance(other, (bool, Linear)) and self.scale:
            self.flips.add(float((Fraction(other) - self.offset) / self.scale))

    def __add__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, Linear)):
            return self._made(int(self) + other, self.scale, self.offset + other)
        return int(self) + other

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, Linear)):
            return self._made(int(self) - other, self.scale, self.offset - other)
        return int(self) - other

    def __rsub__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, Linear)):
            return self._made(other - int(self), -self.scale, other - self.offset)
        return other - int(self)

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, Linear)):
            return self._made(int(self) * other, self.scale * other, self.offset * other, self.multiple * other)
        return int(self) * other

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> Any:
        if isinstance(other, int) and not isinstance(other, (bool, Linear)) and other > 0:
            # floor(n * s / k) changes only where n * s / k crosses an integer: comparing it with m is
            # comparing n * s with m * k, so the scaled form records the same flips
            multiple = self.multiple // other if self.multiple % other == 0 else 0
            return self._made(int(self) // other, self.scale / other, self.offset / other, multiple)
        return int(self) // other

    def __neg__(self) -> Any:
        return self._made(-int(self), -self.scale, -self.offset)

    def __lt__(self, other: Any) -> bool:
        self._record(other)
        return int(self) < (int(other) if isinstance(other, Linear) else other)

    def __le__(self, other: Any) -> bool:
        self._record(other)
        return int(self) <= (int(other) if isinstance(other, Linear) else other)

    def __gt__(self, other: Any) -> bool:
        self._record(other)
        return int(self) > (int(other) if isinstance(other, Linear) else other)

    def __ge__(self, other: Any) -> bool:
        self._record(other)
        return int(self) >= (int(other) if isinstance(other, Linear) else other)

    def __eq__(self, other: object) -> bool:
        self._record(other)
        return int(self) == (int(other) if isinstance(other, Linear) else other)

    def __ne__(self, other: object) -> bool:
        self._record(other)
        return int(self) != (int(other) if isinstance(other, Linear) else other)

    def __bool__(self) -> bool:
        self._record(0)
        return int(self) != 0

    __hash__ = int.__hash__

    def __repr__(self) -> str:
        return repr(int(self))


@dataclass(frozen=True)
class RecordType:
    """A ``NamedTuple`` (or dataclass) class of the file: field names in order, with defaults.

    ``methods`` are the ``def`` s of its body (``Range.contains``,
    ``Heuristic.clip``), interpreted like any function of the file with the
    record as ``self``; those in ``properties`` are read as attributes.
    """

    name: str
    fields: tuple[str, ...]
    defaults: Mapping[str, Any] = field(hash=False)
    methods: Mapping[str, Function] = field(default_factory=dict, hash=False, compare=False, repr=False)
    properties: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def make(self, args: list[Any], kwargs: dict[str, Any], lines: tuple[int, ...]) -> Record:
        """The record ``Name(*args, **kwargs)`` builds; ``ValueError`` naming the field at fault."""
        if len(args) > len(self.fields):
            raise ValueError(f"{self.name}() takes {len(self.fields)} fields, got {len(args)}")
        values = dict(zip(self.fields, args, strict=False))
        for key, value in kwargs.items():
            if key not in self.fields or key in values:
                raise ValueError(f"{self.name}() got an unexpected or repeated field {key!r}")
            values[key] = value
        for name in self.fields:
            if name not in values:
                if name not in self.defaults:
                    raise ValueError(f"{self.name}() is missing field {name!r}")
                values[name] = self.defaults[name]
        return Record(self, tuple(values[name] for name in self.fields), lines)


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

    def asdict(self) -> dict[str, Any]:
        """``_asdict()``: field name -> value, in field order."""
        return dict(zip(self.type.fields, self.values, strict=True))

    def replace(self, args: list[Any], kwargs: dict[str, Any]) -> Record:
        """``_replace(**kwargs)``; ``ValueError`` for positional arguments or unknown fields."""
        values = self.asdict()
        unknown = set(kwargs) - set(values)
        if unknown or args:
            raise ValueError(f"_replace() with unknown fields {sorted(unknown)}")
        values.update(kwargs)
        return Record(self.type, tuple(values.values()), self.lines)

    def __iter__(self):  # a NamedTuple is a tuple
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> Any:
        return self.values[index]


@dataclass(frozen=True)
class Function:
    """A ``def`` or ``lambda`` of the file with the scope it closes over."""

    node: ast.FunctionDef | ast.Lambda
    scope: Scope
    name: str
    filename: str = ""  # the file it is written in, for errors when another file's interpreter calls it
    #: where its parameters' defaults are evaluated, where not ``scope``: a method's class body, as Python does
    defaults_scope: Scope | None = None
    static: bool = False  # a ``@staticmethod``: reached through an instance, it is not bound to it
    cached: bool = False  # ``@cache`` / ``@lru_cache``: a call with the same arguments answers what the first did
    #: ``@contextmanager``: a call gives a ``Generator``, which a ``with`` runs up to its ``yield``
    context: bool = False
    prop: bool = False  # ``@property``: reading the attribute calls it
    #: the ``ClassValue`` whose body defines it (``super()`` looks past it); None for a plain function
    owner: Any = field(default=None, compare=False, repr=False)

    def bind(self, args: list[Any], kwargs: dict[str, Any], evaluate: Callable[[ast.expr, Scope], Any]) -> Scope:
        """A frame with the parameters bound as Python binds them; ``evaluate`` computes defaults at the call.

        ``ValueError`` names the argument at fault.
        """
        spec = self.node.args
        frame = Scope({}, self.scope)
        positional = [*spec.posonlyargs, *spec.args]
        defaults = dict(
            zip([a.arg for a in positional[len(positional) - len(spec.defaults) :]], spec.defaults, strict=True)
        )
        for param, value in zip(positional, args, strict=False):
            frame.values[param.arg] = value
        extra = args[len(positional) :]
        if extra:
            if spec.vararg is None:
                raise ValueError(f"{self.name}() takes {len(positional)} positional arguments, got {len(args)}")
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
                raise ValueError(f"{self.name}() got an unexpected or repeated argument {key!r}")
        if spec.kwarg is not None:
            frame.values[spec.kwarg.arg] = rest
        for param in positional:
            if param.arg not in frame.values:
                if param.arg not in defaults:
                    raise ValueError(f"{self.name}() is missing argument {param.arg!r}")
                frame.values[param.arg] = evaluate(defaults[param.arg], self.defaults_scope or self.scope)
        for param, default in zip(spec.kwonlyargs, spec.kw_defaults, strict=True):
            if param.arg not in frame.values:
                if default is None:
                    raise ValueError(f"{self.name}() is missing keyword argument {param.arg!r}")
                frame.values[param.arg] = evaluate(default, self.defaults_scope or self.scope)
        return frame


@dataclass(frozen=True)
class BoundMethod:
    """A method of the file's classes with its ``self`` (a ``Record`` or a ``Namespace``) bound."""

    func: Function
    owner: Any


@dataclass(frozen=True)
class Generator:
    """A call of a ``@contextmanager`` function of the file, not yet entered: what a ``with`` statement runs."""

    func: Function
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


@dataclass(eq=False)
class ClassValue:
    """A class of the file with behaviour (not a record), where an interpreter's ``classes`` is set: calling it
    builds an instance (a ``Namespace``) and runs its ``__init__``; its attributes and methods, its own and
    its bases' (``bases``, classes of the file or of other files the reader ran), read as Python reads them."""

    name: str
    bases: tuple[ClassValue, ...] = ()
    methods: dict[str, Function] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)

    def mro(self) -> list[ClassValue]:
        """The class, then its bases depth first (each once): Python's order for the single inheritance and the
        simple diamonds engines write."""
        out: list[ClassValue] = []
        for cls in (self, *(c for base in self.bases for c in base.mro())):
            if cls not in out:
                out.append(cls)
        return out

    def lookup(self, name: str, after: ClassValue | None = None) -> tuple[bool, Any]:
        """``(True, value)`` for a method or class attribute named ``name`` along the MRO (past ``after``)."""
        order = self.mro()
        if after is not None and after in order:
            order = order[order.index(after) + 1 :]
        for cls in order:
            if name in cls.methods:
                return True, cls.methods[name]
            if name in cls.attributes:
                return True, cls.attributes[name]
        return False, None

    def instance(self) -> Namespace:
        """A new instance, its ``__init__`` not yet run."""
        methods: dict[str, Function] = {}
        attributes: dict[str, Any] = {}
        for cls in reversed(self.mro()):
            methods.update(cls.methods)
            attributes.update(cls.attributes)
        return Namespace(self.name, {}, methods, attributes, cls=self)

    def __repr__(self) -> str:
        return f"<class {self.name}>"


@dataclass(frozen=True)
class Super:
    """``super()`` in a method of ``cls``: ``instance``'s methods and attributes from past ``cls`` in its MRO."""

    cls: ClassValue
    instance: Namespace


@dataclass(frozen=True)
class Native:
    """A Python callable a reader hands the file as a stand-in (a tensor's ``numel``): called, never interpreted."""

    func: Callable[..., Any]
    name: str

    def __str__(self) -> str:
        return self.name


class Namespace:
    """A mutable object a reader builds for the file's code to read and set attributes on (``self`` of a class
    the evaluator does not instantiate): attributes first, then the class's ``methods``, bound to it (a static
    one unbound), then the attributes its class body assigns (``class_values``).

    ``name`` is also its type to ``isinstance``: a reader hands in an opaque object of an outside class
    (``torch.device``) as a ``Namespace`` named after it."""

    def __init__(
        self,
        name: str,
        values: dict[str, Any] | None = None,
        methods: Mapping[str, Function] | None = None,
        class_values: Mapping[str, Any] | None = None,
        cls: ClassValue | None = None,
    ):
        self.name = name
        self.values = values if values is not None else {}
        self.methods = dict(methods or {})
        self.class_values = dict(class_values or {})
        self.cls = cls  # the file's class it is an instance of, where the interpreter built it

    def attribute(self, name: str) -> tuple[bool, Any]:
        """``(True, value)`` for an attribute, a method or a class attribute; ``(False, None)`` for none."""
        if name in self.values:
            return True, self.values[name]
        if name in self.methods:
            method = self.methods[name]
            return True, method if method.static else BoundMethod(method, self)
        if name in self.class_values:
            return True, self.class_values[name]
        return False, None

    def __repr__(self) -> str:
        return f"<{self.name}>"


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


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def too_big(op: Callable[[Any, Any], Any], left: Any, right: Any) -> bool:
    """Whether ``left op right`` would build a huge number or sequence (a file cannot make us hang)."""
    if op is operator.mul:
        if isinstance(left, (str, tuple, list)) and isinstance(right, int):
            return len(left) * right > MAX_ITEMS
        return False
    if not (is_number(left) and is_number(right)):
        return False
    if op is operator.lshift:
        return right > MAX_BITS
    if isinstance(left, float) or isinstance(right, float):
        return False  # float power overflows to an error, it does not hang
    return right > 0 and max(1, abs(left).bit_length()) * right > MAX_BITS


def oversized(value: Any) -> str:
    """Why ``value`` is larger than a table file may build ("" where it is not): integers by bit length,
    strings, lists, tuples, dicts and sets by length."""
    if isinstance(value, int) and not isinstance(value, bool):
        bits = value.bit_length()
        return f"an integer of {bits} bits (the most is {MAX_BITS})" if bits > MAX_BITS else ""
    if isinstance(value, str):
        return f"a string of {len(value)} characters (the most is {MAX_CHARS})" if len(value) > MAX_CHARS else ""
    if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > MAX_ITEMS:
        return f"a {type(value).__name__} of {len(value)} items (the most is {MAX_ITEMS})"
    return ""


def text_size(value: Any, limit: int = MAX_CHARS) -> int:
    """About how many characters ``str(value)`` has, counted up to just past ``limit`` (then it stops): what
    printing a value would build, known before building it. Shared and cyclic parts count once."""
    total, stack, seen = 0, [value], set()
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2  # digits, near enough
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            if id(item) in seen:
                total += 5
                continue
            seen.add(id(item))
            total += 2 * len(item) + 2
            stack.extend(item.items() if isinstance(item, dict) else item)
        else:
            total += 40  # a record, a symbol, a float: short
    return total


def size_refusal(func: Any, args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any]) -> str:
    """Why a call of a builtin or pure method would build more than a table file may, before it runs ("":
    it would not); what runs then is checked by its result (``oversized``)."""
    name = getattr(func, "__name__", "")
    owner = getattr(func, "__self__", None)
    if func is round and len(args) > 1 and isinstance(args[1], int) and abs(args[1]) > MAX_DIGITS:
        return f"round() to {args[1]} digits (the most is {MAX_DIGITS} either way)"
    if func is sum:
        start = args[1] if len(args) > 1 else kwargs.get("start", 0)
        if not is_number(start) and isinstance(args[0], (list, tuple)):
            count = len(start) + sum(len(a) for a in args[0] if isinstance(a, (str, list, tuple)))
            if count > MAX_ITEMS:
                return f"sum() of sequences into {count} items (the most is {MAX_ITEMS})"
    if func in (str, repr) and args and text_size(args[0]) > MAX_CHARS:
        return f"str() of a value longer than {MAX_CHARS} characters"
    if isinstance(owner, str) and name == "join" and args and isinstance(args[0], (list, tuple)):
        count = sum(len(a) for a in args[0] if isinstance(a, str)) + len(owner) * len(args[0])
        if count > MAX_CHARS:
            return f"join() into {count} characters (the most is {MAX_CHARS})"
    if isinstance(owner, str) and name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, str) and isinstance(new, str):
            count = len(owner) + (len(owner) + 1 if old == "" else owner.count(old)) * len(new)
            if count > MAX_CHARS:
                return f"replace() into {count} characters (the most is {MAX_CHARS})"
    if isinstance(owner, (list, set, dict)) and name in ("extend", "update") and args:
        grows = args[0]
        count = len(owner) + (len(grows) if hasattr(grows, "__len__") else 0)
        if count > MAX_ITEMS:
            return f"{name}() into {count} items (the most is {MAX_ITEMS})"
    return ""


_WIDTH = re.compile(r"(\d+)")


def spec_refusal(spec: str) -> str:
    """Why a format spec would build more than a table file may ("": it would not): its width or precision."""
    for digits in _WIDTH.findall(spec):
        if len(digits) > 7 or int(digits) > MAX_CHARS:
            return f"format spec {spec[:40]!r} asks for more than {MAX_CHARS} characters"
    return ""


def _range(*args: int) -> list[int]:
    if len(range(*args)) > MAX_ITEMS:
        raise ValueError(f"range{args} is longer than {MAX_ITEMS}")
    return list(range(*args))


def _symbolic_min_max(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        items = args[0] if len(args) == 1 else args
        items = list(items)
        if any(isinstance(v, Symbol) for v in items):
            return Symbol(f"{name}({','.join(str(v) for v in items)})")
        return func(items)

    return call


def _isinstance(value: Any, kinds: Any) -> bool:
    if isinstance(value, Symbol):
        # an opaque name stands for any object from outside the file: its type is unknown, not "none of these"
        raise Unsupported(f"isinstance of the opaque value {value}: its type is not known to the evaluator")
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    for kind in kinds:
        if isinstance(kind, RecordType) and isinstance(value, Record) and value.type == kind:
            return True
        if isinstance(kind, Symbol) and isinstance(value, Namespace) and value.name == kind.path:
            return True  # an object a reader handed in, of the outside class it is named after
        if isinstance(kind, ClassValue) and isinstance(value, Namespace) and value.cls and kind in value.cls.mro():
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
    "id": id,
    "callable": callable,
    "getattr": getattr,  # the evaluator answers these three itself, on what it models
    "hasattr": hasattr,
    "super": super,
    "None": None,
    "True": True,
    "False": False,
}
CONSTANT_NAMES = ("int", "float", "None", "True", "False")  # the builtins a constant expression may name
METHODS = {
    dict: ("get", "items", "keys", "values", "copy", "update", "setdefault", "pop", "clear"),
    list: ("index", "count", "copy", "append", "extend", "insert", "pop", "remove", "clear"),
    tuple: ("index", "count"),
    set: ("add", "discard", "update", "copy", "clear"),
    str: (
        "startswith",
        "endswith",
        "split",
        "rsplit",
        "partition",
        "rpartition",
        "strip",
        "lstrip",
        "rstrip",
        "lower",
        "upper",
        "replace",
        "join",
        "find",
        "isdigit",
    ),
}


def is_pure_method(func: Any) -> bool:
    """Whether ``func`` is one of ``METHODS`` bound to a dict, list, tuple, set or str (the file's own data:
    what changes is what the file built)."""
    owner = getattr(func, "__self__", None)
    return type(owner) in METHODS and getattr(func, "__name__", "") in METHODS[type(owner)]
