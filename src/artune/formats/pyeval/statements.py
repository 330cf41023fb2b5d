"""Statements: running a module's top level, ``def`` bodies and ``NamedTuple`` classes; ``constants``.

``Interpreter`` adds to the expression evaluator what SGLang's configs
need: assignments, imports (bound to opaque symbols, or to the caller's
fakes), ``if``/``for``/``return``/``assert``/``raise``/``global``, function
definitions with pure decorators, and record classes. ``constants`` is the
restricted reading vLLM's tables need: each top-level (and class-level)
assignment evaluated as a constant expression, the others left out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from artune.errors import OutsideCall, Raised, Unsupported, Unwind
from artune.formats.pyeval import values
from artune.formats.pyeval.expressions import BINOPS, MAX_STEPS, Evaluator, parse
from artune.formats.pyeval.values import ClassValue, Function, Namespace, Opaque, RecordType, Scope, Symbol

_PURE_DECORATORS = ("cache", "lru_cache", "functools.cache", "functools.lru_cache", "dataclass", "staticmethod")
_MEMO_DECORATORS = ("cache", "lru_cache", "functools.cache", "functools.lru_cache")
_CONTEXT_DECORATORS = ("contextmanager", "contextlib.contextmanager")
#: decorators that leave what a call computes as it is (they change how it is traced, compiled or logged)
_TRANSPARENT_DECORATORS = (
    "torch.no_grad",
    "torch.inference_mode",
    "torch.compiler.disable",
    "torch._dynamo.disable",
    "override",
    "typing.override",
    "abstractmethod",
    "abc.abstractmethod",
)
_ENUM_BASES = ("Enum", "IntEnum", "StrEnum", "enum.Enum", "enum.IntEnum", "enum.StrEnum", "IntFlag", "Flag")
#: which exception kinds a handler of each name catches (the kinds pyeval raises: what the file raises, what
#: a subscript or a reader's stand-in raises); a name not here catches its own kind only
_CATCHES = {
    "Exception": None,  # every kind
    "BaseException": None,
    "LookupError": ("KeyError", "IndexError", "LookupError"),
    "ArithmeticError": ("ZeroDivisionError", "OverflowError", "ArithmeticError"),
    "OSError": ("OSError", "FileNotFoundError", "PermissionError"),
}
#: what a method may be decorated with and still be read as written (a context manager's body is what it runs)
_METHOD_DECORATORS = (*_PURE_DECORATORS, *_CONTEXT_DECORATORS, "property")
_RECORD_BASES = ("NamedTuple", "typing.NamedTuple")


#: what a ``break`` and a ``continue`` unwind with (as an ``Unwind`` to the loop, never past it)
_BREAK, _CONTINUE = object(), object()


@dataclass(frozen=True)
class Unmodelled:
    """A statement or condition of the file that the evaluator could not follow, and what it assumed instead."""

    function: str  # the file's function it is in ("CustomAllReduceV2.should_custom_ar"); "" at a top level
    filename: str
    line: int
    construct: str  # the statement's first line, or the condition ("if flag():")
    reason: str  # why, as the evaluator says it (without the file and line)
    assumed: str  # "the condition is false", "the statement has no effect" or "it returns None"


NO_EFFECT = "the statement has no effect"
FALSE = "the condition is false"
RETURNS_NONE = "it returns None"
_PLACE = re.compile(r"^.*?:(\d+|\?): ")


class Interpreter(Evaluator):
    """Runs one module's AST; ``globals`` holds what its top level bound, ``lines`` where.

    ``unmodelled``: where a reader sets it, a statement or condition the
    evaluator cannot follow (a construct outside the subset, a call from
    outside the file that no fake answers) no longer ends the run: the hook
    is told (``Unmodelled``) and the run goes on as if the condition were
    false, the statement absent, or a ``return`` returned ``None``. What the
    file itself raises (``Raised``) still propagates, as does running out of
    the step budget.
    """

    def __init__(
        self,
        source: str,
        filename: str,
        *,
        fakes: Mapping[str, Any] | None = None,
        package: str = "",
        objects: bool = False,
    ) -> None:
        super().__init__(filename, fakes=fakes)
        self.tree = parse(source, filename)
        self.globals = Scope({})
        self.lines: dict[str, int] = {}  # name -> line of its (last) top-level binding
        self.unmodelled: Callable[[Unmodelled], None] | None = None
        self._stopping = False  # run_until_outside in progress: a call outside the file stops it, never the hook
        self._classes: dict[str, tuple[dict[str, Function], dict[str, Any]]] = {}
        self.package = package  # the module's package, for ``from .x import y`` ("" : relative imports fail)
        #: the file's objects as Python has them: classes with behaviour are ``ClassValue`` s (instances, bases,
        #: ``super()``) rather than opaque names, and ``try``, ``with`` and ``del`` run
        self.objects = objects
        self._yields: list[Callable[[Any], None]] = []  # the with-bodies a ``yield`` of a context manager runs
        #: the ``if`` statements whose body is running, outermost first, with the function each is in: where a
        #: reader is when a stand-in it handed in is called (which branch of a dispatch launched a kernel)
        self.taken: list[tuple[str, ast.If]] = []
        #: ``if`` statements a reader asks about as if their test were false: what the code does when that
        #: branch declines (the next path of a dispatch)
        self.assume_false: set[ast.If] = set()
        #: ``(file, line)`` of ``if`` tests the evaluator cannot know that a reader asks about as true (their
        #: other outcome), where it would otherwise take them as false
        self.assume_true: set[tuple[str, int]] = set()

    def run_module(self, skip_failures: bool = False, defer: bool = False) -> None:
        """Bind every top-level name; with ``skip_failures``, a binding that cannot be evaluated is left out
        (silently: with ``unmodelled`` set and no ``skip_failures``, the hook is told).

        With ``defer``, a statement that only binds names (an assignment to names, a ``def``, a class, an
        import) and cannot be evaluated is left out too, its reason kept in ``unbound``: using such a name
        later is the error, at the use, naming why it is unbound. Any other statement that fails (one that
        changes what an earlier statement bound: ``TABLE["10.7"] = ...``, ``TABLE.update(...)``) is told to
        the hook, as is what the file raises at its top level, and the run goes on.
        """
        exhausted = False
        for stmt in self.tree.body:
            names = bound_names(stmt)
            only_binds = bool(names) and _only_binds(stmt)
            hook = self.unmodelled
            if defer and only_binds:
                self.unmodelled = None  # all or nothing: what it cannot follow leaves its names unbound
            try:
                self.exec_stmt(stmt, self.globals, top=True)
            except Unsupported as err:
                if self.steps > MAX_STEPS and hook is not None and not exhausted:
                    exhausted = True  # told once: this statement and every one after it at the top level
                    self.unmodelled = hook
                    self._tell(err, stmt, "it and every later statement of the module's top level are left out")
                if defer and only_binds:
                    if hook is not None and any(k.arg == "metaclass" for k in getattr(stmt, "keywords", ())):
                        self.unmodelled = hook  # a class the evaluator will not build is said, not only unbound
                        self._tell(err, stmt, "the class is left unbound")
                    for name in names:
                        self.unbound[name] = f"line {stmt.lineno}: {_PLACE.sub('', str(err), count=1)}"
                elif defer and self.unmodelled is not None and self.steps <= MAX_STEPS:
                    self._tell(err, stmt, NO_EFFECT)
                elif isinstance(err, Raised) or (not skip_failures and not self._tolerated(err, stmt, NO_EFFECT)):
                    raise
                for name in names if only_binds else ():  # a failed TABLE[k] = ... leaves TABLE as it was
                    self.globals.values.pop(name, None)
            except Unwind:
                raise self.fail(stmt, "'return' outside a function") from None
            finally:
                self.unmodelled = hook

    def exec_block(self, body: list[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            try:
                self.exec_stmt(stmt, scope)
            except (Unwind, Raised):
                raise
            except Unsupported as err:
                returns = isinstance(stmt, ast.Return)
                if not self._tolerated(err, stmt, RETURNS_NONE if returns else NO_EFFECT):
                    raise
                if returns:
                    raise Unwind(None) from None

    def _tolerated(
        self, err: Unsupported, node: ast.stmt, assumed: str, construct: str = "", function: str = ""
    ) -> bool:
        """Whether the run goes on past ``err`` at ``node`` (the hook told), or must end with it."""
        if (
            self.unmodelled is None
            or isinstance(err, Raised)
            or (self._stopping and isinstance(err, OutsideCall))
            or self.steps > MAX_STEPS
        ):
            return False
        self._tell(err, node, assumed, construct, function)
        return True

    def _tell(self, err: Unsupported, node: ast.stmt, assumed: str, construct: str = "", function: str = "") -> None:
        assert self.unmodelled is not None
        if not construct:
            text = ast.unparse(node).splitlines()
            construct = text[0] if text else type(node).__name__
        function = function or (self.functions[-1] if self.functions else "")
        reason = _PLACE.sub("", str(err), count=1)
        self.unmodelled(Unmodelled(function, self.filename, node.lineno, construct[:100], reason, assumed))

    def condition(self, stmt: ast.If, scope: Scope) -> Any:
        """The value of an ``if`` statement's test; where it cannot be evaluated and a hook is set, false."""
        try:
            return bool(self.eval(stmt.test, scope))  # the truth too: an opaque value's is unknown
        except Unsupported as err:
            if not self._tolerated(err, stmt, FALSE, f"if {ast.unparse(stmt.test)}:"):
                raise
            return (self.filename, stmt.lineno) in self.assume_true

    def exec_stmt(self, stmt: ast.stmt, scope: Scope, top: bool = False) -> None:
        self._tick(stmt)
        try:
            self._exec(stmt, scope)
        except TypeError as err:  # the file's values misused (unpacking an int, an unhashable key)
            raise self.fail(stmt, f"TypeError: {err}") from None
        if top:
            for name in bound_names(stmt):
                self.lines[name] = stmt.lineno

    def _exec(self, stmt: ast.stmt, scope: Scope) -> None:
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                return  # docstring
            if isinstance(stmt.value, ast.Yield) and self._yields:
                value = None if stmt.value.value is None else self.eval(stmt.value.value, scope)
                self._yields[-1](value)  # the with-body of the context manager being entered
                return
            self.eval(stmt.value, scope)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self._import(stmt, scope)
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value, scope)
            for target in stmt.targets:
                self.assign(target, value, scope)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, scope), scope)
        elif isinstance(stmt, ast.AugAssign):
            op = BINOPS.get(type(stmt.op))
            if op is None or not isinstance(stmt.target, (ast.Name, ast.Attribute, ast.Subscript)):
                raise self.fail(stmt, f"unsupported construct {self._construct(stmt)}")
            value = self.binop(stmt, op, self.eval(stmt.target, scope), self.eval(stmt.value, scope))
            self.assign(stmt.target, value, scope)
        elif isinstance(stmt, ast.FunctionDef):
            scope.values[stmt.name] = self.function_def(stmt, scope)
        elif isinstance(stmt, ast.ClassDef):
            scope.values[stmt.name] = self.class_def(stmt, scope)
        elif isinstance(stmt, ast.Try) and self.objects:
            self._try(stmt, scope)
        elif isinstance(stmt, ast.With) and self.objects:
            self._with(stmt.items, stmt.body, scope)
        elif isinstance(stmt, ast.Delete) and self.objects:
            for target in stmt.targets:
                self._delete(target, scope)
        elif isinstance(stmt, ast.Return):
            raise Unwind(None if stmt.value is None else self.eval(stmt.value, scope))
        elif isinstance(stmt, ast.If):
            taken = stmt not in self.assume_false and self.condition(stmt, scope)
            if not taken:
                self.exec_block(stmt.orelse, scope)
                return
            self.taken.append((self.functions[-1] if self.functions else "", stmt))
            try:
                self.exec_block(stmt.body, scope)
            finally:
                self.taken.pop()
        elif isinstance(stmt, ast.For) and (not stmt.orelse or self.objects):
            for item in self.iterable(stmt.iter, scope):
                self.assign(stmt.target, item, scope)
                try:
                    self.exec_block(stmt.body, scope)
                except Unwind as jump:
                    if jump.value is _CONTINUE:
                        continue
                    if jump.value is _BREAK:
                        break
                    raise
            else:
                self.exec_block(stmt.orelse, scope)
        elif isinstance(stmt, ast.Break) and self.objects:
            raise Unwind(_BREAK)
        elif isinstance(stmt, ast.Continue) and self.objects:
            raise Unwind(_CONTINUE)
        elif isinstance(stmt, ast.Assert):
            if not self.eval(stmt.test, scope):
                raise Raised(
                    "AssertionError", f"assert failed: {ast.unparse(stmt.test)}", f"{self.filename}:{stmt.lineno}"
                )
        elif isinstance(stmt, ast.Raise):
            what = ast.unparse(stmt.exc) if stmt.exc is not None else "raise"
            raise Raised(what.split("(")[0], f"the file raises {what[:80]}", f"{self.filename}:{stmt.lineno}")
        elif isinstance(stmt, ast.Global):
            scope.global_names.update(stmt.names)
        elif isinstance(stmt, ast.Pass):
            return
        else:
            raise self.fail(stmt, f"unsupported construct {self._construct(stmt)}")

    def function_def(self, stmt: ast.FunctionDef, scope: Scope, owner: ClassValue | None = None) -> Function:
        """The function a ``def`` binds, its decorators read: ``@cache``, ``@contextmanager``, ``@property``,
        ``@staticmethod`` and those that leave a call's result as it is; any other is not understood."""
        names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in stmt.decorator_list]
        known = (*_PURE_DECORATORS, *_CONTEXT_DECORATORS)
        if self.objects:
            known += (*_TRANSPARENT_DECORATORS, "property", "classmethod")
        for name in names:
            if name not in known:
                raise self.fail(stmt, f"decorator '@{name}' on {stmt.name}() is not understood")
        return Function(
            stmt,
            scope,
            stmt.name if owner is None else f"{owner.name}.{stmt.name}",
            self.filename,
            cached=any(name in _MEMO_DECORATORS for name in names),
            context=any(name in _CONTEXT_DECORATORS for name in names),
            prop="property" in names,
            static="staticmethod" in names,
            owner=owner,
        )

    def _try(self, stmt: ast.Try, scope: Scope) -> None:
        """``try``/``except``/``else``/``finally``: a handler runs for what the file (or a stand-in) raises, when
        its type names that kind (``Exception`` every kind); what the evaluator cannot follow is no exception."""
        try:
            try:
                self.exec_block(stmt.body, scope)
            except Raised as err:
                handler = next((h for h in stmt.handlers if _catches(h, err.kind)), None)
                if handler is None:
                    raise
                if handler.name:
                    scope.values[handler.name] = Opaque(f"{err.kind}({str(err)!r})")
                self.exec_block(handler.body, scope)
            else:
                self.exec_block(stmt.orelse, scope)
        finally:
            self.exec_block(stmt.finalbody, scope)

    def _with(self, items: list[ast.withitem], body: list[ast.stmt], scope: Scope) -> None:
        """``with``: a context manager of the file runs up to its ``yield``, the body there, then the rest;
        any other (a lock, a stream from outside) is entered as an opaque value and the body runs."""
        if not items:
            self.exec_block(body, scope)
            return
        item, rest = items[0], items[1:]
        manager = self.eval(item.context_expr, scope)
        if not isinstance(manager, values.Generator):
            if item.optional_vars is not None:
                self.assign(item.optional_vars, Opaque(f"{ast.unparse(item.context_expr)}.__enter__()"), scope)
            self._with(rest, body, scope)
            return
        entered: list[bool] = []

        def inside(value: Any) -> None:
            if entered:
                raise Raised("RuntimeError", "generator didn't stop", f"{self.filename}:{item.context_expr.lineno}")
            entered.append(True)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, scope)
            self._with(rest, body, scope)

        self._yields.append(inside)
        try:
            self.call(replace(manager.func, context=False), list(manager.args), dict(manager.kwargs))
        finally:
            self._yields.pop()
        if not entered:
            raise Raised("RuntimeError", "generator didn't yield", f"{self.filename}:{item.context_expr.lineno}")

    def enter(self, manager: values.Generator, body: Callable[[Any], Any]) -> Any:
        """``with manager as value: body(value)`` for a reader: a context manager of the file (``capture()``) run
        around a call the reader makes, up to its ``yield`` and on after it; what ``body`` returns."""
        out: list[Any] = []
        self._yields.append(lambda value: out.append(body(value)))
        try:
            self.call(replace(manager.func, context=False), list(manager.args), dict(manager.kwargs))
        finally:
            self._yields.pop()
        if not out:
            raise Raised("RuntimeError", f"{manager.func.filename}: {manager.func.name}() did not yield")
        return out[0]

    def _delete(self, target: ast.expr, scope: Scope) -> None:
        if isinstance(target, ast.Name):
            (scope.root() if target.id in scope.global_names else scope).values.pop(target.id, None)
        elif isinstance(target, ast.Attribute):
            owner = self.eval(target.value, scope)
            if not isinstance(owner, Namespace):
                raise self.fail(target, f"del of an attribute of {type(owner).__name__}")
            owner.values.pop(target.attr, None)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, scope)
            if not isinstance(container, (dict, list)):
                raise self.fail(target, f"del of an item of {type(container).__name__}")
            del container[self.eval(target.slice, scope)]
        else:
            raise self.fail(target, f"unsupported construct {self._construct(target)}")

    def _import(self, stmt: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        """Bind each imported name to the caller's fake for it, or to an opaque ``Symbol``."""
        for alias in stmt.names:
            if alias.name == "*":
                raise self.fail(stmt, "'import *' hides which names exist")
            module = getattr(stmt, "module", None) or ""
            level = getattr(stmt, "level", 0) or 0
            if level and self.package:  # "from .x import y" in package a.b: a.b.x.y
                parts = self.package.split(".")
                base = ".".join(parts[: len(parts) - level + 1])
                module = f"{base}.{module}" if module else base
            full = f"{module}.{alias.name}" if module else alias.name
            bound = alias.asname or alias.name.split(".")[0]
            fake = self.fakes.get(full, self.fakes.get(alias.name))
            scope.values[bound] = fake if fake is not None else Symbol(full if alias.asname or module else bound)
            self.lines[bound] = stmt.lineno

    def _enum(self, stmt: ast.ClassDef, scope: Scope) -> Namespace:
        """An enum where ``objects`` is set: its members (each with ``name`` and ``value``) as attributes,
        ``__members__``, ``Cls[name]`` and ``Cls(value)``; a member whose value the evaluator cannot compute
        (``auto()``) is numbered as ``auto`` numbers it, one above the one before."""
        members: dict[str, Namespace] = {}
        last = 0
        for item in stmt.body:
            if isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                target = item.targets[0].id
                try:
                    value = self.eval(item.value, scope)
                except Unsupported:
                    value = Symbol("auto()")
                if isinstance(value, Symbol):
                    value = last + 1
                last = value if isinstance(value, int) else last
                members[target] = Namespace(f"{stmt.name}.{target}", {"name": target, "value": value})

        def by_name(name: Any) -> Namespace:
            if name not in members:
                raise Raised("KeyError", f"{stmt.name}[{name!r}]: no such member")
            return members[name]

        def by_value(value: Any) -> Namespace:
            found = next((m for m in members.values() if m.values["value"] == value), None)
            if found is None:
                raise Raised("ValueError", f"{value!r} is not a valid {stmt.name}")
            return found

        return Namespace(
            stmt.name,
            {
                **members,
                "__members__": dict(members),
                "__getitem__": values.Native(by_name, f"{stmt.name}[]"),
                "__call__": values.Native(by_value, stmt.name),
            },
        )

    def class_def(self, stmt: ast.ClassDef, scope: Scope) -> Any:
        """A ``RecordType`` for a ``NamedTuple`` or dataclass; where ``objects`` is set, a ``ClassValue`` for a
        class with behaviour; a ``Symbol`` for any other class (an enum: its members stay names). A class with
        a ``metaclass=`` is not one the evaluator builds: a metaclass can make the class anything."""
        meta = next((k for k in stmt.keywords if k.arg == "metaclass"), None)
        if meta is not None:
            raise self.fail(stmt, f"class {stmt.name} has metaclass={ast.unparse(meta.value)[:60]}, which is not run")
        bases = [ast.unparse(b) for b in stmt.bases]
        decorators = [ast.unparse(d) for d in stmt.decorator_list]
        is_record = any(b in _RECORD_BASES for b in bases) or any(d.startswith("dataclass") for d in decorators)
        enum = any(b in _ENUM_BASES for b in bases)
        if not is_record and self.objects and not enum:
            return self._class_value(stmt, scope)
        if enum and self.objects:
            return self._enum(stmt, scope)
        if not is_record:
            return Symbol(stmt.name)  # an enum or a class with behaviour: its attributes stay names
        fields: list[str] = []
        defaults: dict[str, Any] = {}
        methods: dict[str, Function] = {}
        properties: set[str] = set()
        for item in stmt.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                fields.append(item.target.id)
                if item.value is not None:
                    defaults[item.target.id] = self.eval(item.value, scope)
            elif isinstance(item, ast.FunctionDef):
                # methods close over the module, as Python's do (a class body is no enclosing scope);
                # only plain methods and properties: any other decorator leaves the method out
                names = [ast.unparse(d) for d in item.decorator_list]
                if names in ([], ["property"]):
                    methods[item.name] = Function(item, scope, f"{stmt.name}.{item.name}", self.filename)
                    if names:
                        properties.add(item.name)
        return RecordType(stmt.name, tuple(fields), defaults, methods, frozenset(properties))

    def _class_value(self, stmt: ast.ClassDef, scope: Scope) -> ClassValue:
        """The class a ``class`` statement binds: its body run in order in a scope of its own, each ``def`` a
        method closing over the module (a class body is no enclosing scope), its defaults evaluated in the class
        body. A base from outside the files (``object``, ``Generic[T]``) adds nothing."""
        bases: list[ClassValue] = []
        for node in stmt.bases:
            try:
                base = self.eval(node, scope)
            except Unsupported:
                continue  # a base the evaluator cannot name comes from outside the files: it adds nothing read
            if isinstance(base, ClassValue):
                bases.append(base)
        cls = ClassValue(stmt.name, tuple(bases))
        body = Scope({}, scope)
        for item in stmt.body:
            if isinstance(item, ast.FunctionDef):
                try:
                    method = self.function_def(item, scope, owner=cls)
                except Unsupported as err:
                    body.values[item.name] = _refusing(str(err))  # an error where it is called, not here
                    continue
                cls.methods[item.name] = replace(method, defaults_scope=body)
                continue
            try:
                self.exec_stmt(item, body)
            except Raised:
                raise
            except Unsupported as err:
                if not self._tolerated(err, item, NO_EFFECT):
                    raise
                for bound in bound_names(item):
                    body.values.pop(bound, None)
        cls.attributes.update(body.values)
        return cls

    def class_methods(self, name: str) -> dict[str, Function]:
        """The methods of the top-level class ``name`` (one the evaluator does not make records of, such as
        a communicator), closing over the module: what a reader binds to a ``Namespace`` standing in for ``self``."""
        return self.class_body(name)[0]

    def class_body(self, name: str) -> tuple[dict[str, Function], dict[str, Any]]:
        """The top-level class ``name`` as Python defines it: its methods, and the attributes its body assigns.

        The body runs in order in a scope of its own whose names fall back to
        the module's (``_MAX_SIZE = 8 * MB``, ``if _is_hip: ...``). Each
        ``def`` is a method closing over the module (a class body is no
        enclosing scope), its defaults evaluated in the class body
        (``max_size=_MAX_SIZE``); a ``@staticmethod`` stays unbound. An
        assignment that cannot be evaluated is left out (the hook told).
        """
        if name in self._classes:
            return self._classes[name]
        node = next((s for s in self.tree.body if isinstance(s, ast.ClassDef) and s.name == name), None)
        if node is None:
            raise self.fail(None, f"no class {name} here")
        scope = Scope({}, self.globals)
        methods: dict[str, Function] = {}
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                decorators = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in item.decorator_list]
                for unknown in [d for d in decorators if d not in _METHOD_DECORATORS]:
                    err = Unsupported(f"decorator '@{unknown}' on {name}.{item.name}() is not understood")
                    self._tolerated(err, item, "it returns the method unchanged", f"@{unknown}", name)
                methods[item.name] = Function(
                    item,
                    self.globals,
                    f"{name}.{item.name}",
                    self.filename,
                    defaults_scope=scope,
                    static="staticmethod" in decorators,
                    cached=any(d in _MEMO_DECORATORS for d in decorators),
                )
                continue
            try:
                self.exec_stmt(item, scope)
            except Raised:
                raise
            except Unsupported as err:
                self._tolerated(err, item, NO_EFFECT, function=name)
                for bound in bound_names(item):
                    scope.values.pop(bound, None)
        self._classes[name] = (methods, dict(scope.values))
        return self._classes[name]

    def instance(self, name: str, values: dict[str, Any] | None = None) -> Namespace:
        """A ``Namespace`` standing in for an instance of class ``name``, with its methods and class attributes."""
        methods, attributes = self.class_body(name)
        return Namespace(name, values, methods, attributes)

    def run_until_outside(self, func: Function, args: list[Any]) -> tuple[str, int | None, str]:
        """Run ``func``'s body one top-level statement at a time, as a call would, until it returns
        (``("returned", line, "")``), ends (``("ended", None, "")``) or a statement calls a name from outside
        the file that no fake stands in for (``("stopped", line, name)``; that statement has no effect).

        How a reader follows the part of a constructor that sizes an object, up to the code it cannot follow
        (allocating device memory). A construct outside the subset is still an ``Unsupported`` error (where
        ``unmodelled`` is set, the hook is told and the run goes on).
        """
        try:
            frame = func.bind(args, {}, self.eval)
        except ValueError as err:
            raise self.fail(func.node, str(err)) from None
        assert isinstance(func.node, ast.FunctionDef)
        stopping, self._stopping = self._stopping, True
        self.functions.append(func.name)
        self.ran.setdefault((self.filename, func.name), func.node)
        try:
            for stmt in func.node.body:
                try:
                    self.exec_block([stmt], frame)
                except Unwind:
                    return "returned", stmt.lineno, ""
                except OutsideCall as err:
                    return "stopped", stmt.lineno, err.name
        finally:
            self.functions.pop()
            self._stopping = stopping
        return "ended", None, ""

    def run_body(self, func: Function, frame: Scope) -> Any:
        if isinstance(func.node, ast.Lambda):
            return super().run_body(func, frame)
        try:
            self.exec_block(func.node.body, frame)
        except Unwind as ret:
            return ret.value
        return None


def _refusing(reason: str) -> values.Native:
    """A method the evaluator does not understand (an unknown decorator): ``Unsupported`` where it is called."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Unsupported(reason)

    return values.Native(refuse, reason)


def _catches(handler: ast.ExceptHandler, kind: str) -> bool:
    """Whether ``except <handler.type>`` catches an exception of ``kind`` (a bare ``except`` catches all)."""
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for node in names:
        name = ast.unparse(node).rsplit(".", 1)[-1]
        caught = _CATCHES.get(name, (name,))
        if caught is None or kind in caught:
            return True
    return False


def _only_binds(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` only binds names (and so changes nothing bound before it): an assignment to names, a
    ``def``, a class, an import, or an ``if``/``try``/``with`` made of such statements."""
    if isinstance(stmt, ast.Assign):
        return all(isinstance(n, (ast.Name, ast.Tuple, ast.List)) for n in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name)
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, (ast.If, ast.Try, ast.With)):
        return all(_only_binds(s) for s in _inner(stmt))
    return isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Pass))


def _inner(stmt: ast.stmt) -> list[ast.stmt]:
    """The statements of a compound statement's bodies (its ``else``, handlers and ``finally`` included)."""
    out = [*getattr(stmt, "body", []), *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]
    for handler in getattr(stmt, "handlers", []):
        out += handler.body
    return out


def bound_names(stmt: ast.stmt) -> list[str]:
    """The names an assignment, ``def``, ``class`` or import binds (those of an ``if``/``try``/``with``'s
    bodies for such a statement)."""
    if isinstance(stmt, ast.Assign):
        return [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in stmt.names if a.name != "*"]
    if isinstance(stmt, (ast.If, ast.Try, ast.With)):
        return list(dict.fromkeys(name for inner in _inner(stmt) for name in bound_names(inner)))
    return []


def assignments(tree: ast.Module) -> list[tuple[str, ast.Assign | ast.AnnAssign]]:
    """Top-level and class-level assignments, in file order, with ``Class.`` as the prefix of the latter."""
    out: list[tuple[str, ast.Assign | ast.AnnAssign]] = []
    for stmt in tree.body:
        body = stmt.body if isinstance(stmt, ast.ClassDef) else [stmt]
        prefix = f"{stmt.name}." if isinstance(stmt, ast.ClassDef) else ""
        out += [(prefix, s) for s in body if isinstance(s, (ast.Assign, ast.AnnAssign))]
    return out


def constants(source: str, filename: str) -> tuple[dict[str, Any], dict[str, int], ast.Module]:
    """The module's top-level constant bindings (and class-level ones, as ``Class.NAME``), their lines, the AST.

    A binding whose value is not a constant expression is left out; using
    such a name later is an ``Unsupported`` error naming it.
    """
    tree = parse(source, filename)
    evaluator = Evaluator(filename, restricted=True)
    scope = Scope({})  # what later top-level expressions may name
    class_values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for prefix, item in assignments(tree):
        try:
            value = evaluator.eval(item.value, scope) if item.value is not None else None
        except Raised:
            raise
        except Unsupported:
            continue
        for name in bound_names(item):
            lines[prefix + name] = item.lineno
            if prefix:
                class_values[prefix + name] = value
            else:
                scope.values[name] = value
    return {**scope.values, **class_values}, lines, tree
