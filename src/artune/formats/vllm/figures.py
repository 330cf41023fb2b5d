"""vLLM's all-reduce tables as data: what each module's top level holds once it has run, and where each row is.

vLLM's tables are module-level values: ``all_reduce_utils.py``'s
``CUSTOM_ALL_REDUCE_MAX_SIZES`` and ``SYMM_MEM_ALL_REDUCE_MAX_SIZES``
(``"M.m"`` -> world size -> bytes), ``NCCL_SYMM_MEM_ALL_REDUCE_CONFIG`` and
``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB`` (``(major*10+minor, world size, nodes)`` ->
MB, vLLM 0.29 on); ``symm_mem.py``'s ``SymmMemCommunicator._WORLD_SIZES_MULTIMEM``;
the FlashInfer fusion file's ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` and
``_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB`` (int arch ``major*10+minor``, MB), or
the older world-size-only ``_FI_MAX_SIZES``. They are read from the modules
``artune.formats.vllm.code`` evaluated, so a row computed by a helper or
changed by a statement after the literal is the row vLLM has. A table the
evaluator could not compute is reported (``Figures.unread``: the caveat says
where and why) and read as absent; a table whose value is not the shape vLLM
gives it is a ``TableError`` naming the file and line. Each row's line is
the literal's, or the line of the later statement that set it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from artune.errors import TableError
from artune.formats.engine import short
from artune.formats.pyeval.values import ClassValue, Opaque, Symbol
from artune.formats.vllm.code import COMM, FILES, PACKAGE, ReleaseCode

UTILS = COMM + "all_reduce_utils.py"
CUSTOM_AR_FILE = COMM + "custom_all_reduce.py"
CUSTOM_AR = "CUSTOM_ALL_REDUCE_MAX_SIZES"
SYMM_MEM = "SYMM_MEM_ALL_REDUCE_MAX_SIZES"
MULTIMEM = "_WORLD_SIZES_MULTIMEM"
NCCL_SYMM = "NCCL_SYMM_MEM_ALL_REDUCE_CONFIG"
FI_FUSION = "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"
FI_ONESHOT = "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB"
FI_MNNVL = "FI_MNNVL_ALLREDUCE_MAX_SIZE_MB"
FI_OLD = "_FI_MAX_SIZES"
_NCCL_SYMM_KEYS = {"min_world_size", "thresholds", "custom_ar_preferred_ranges", "always_use_above_world_size"}
_ARCH = re.compile(r"^\d+\.\d+$")
_UTILS_MODULE = PACKAGE + ".all_reduce_utils"
_SYMM_MODULE = PACKAGE + ".symm_mem"
_CUSTOM_MODULE = PACKAGE + ".custom_all_reduce"
_FUSION_MODULES = ("vllm.compilation.passes.fusion.allreduce_rms_fusion", "vllm.compilation.collective_fusion")

__all__ = [
    "CUSTOM_AR",
    "CUSTOM_AR_FILE",
    "FILES",
    "FI_FUSION",
    "FI_MNNVL",
    "FI_ONESHOT",
    "MULTIMEM",
    "SYMM_MEM",
    "UTILS",
    "Figures",
    "int_arch",
    "key_lines",
    "read_figures",
]


@dataclass(frozen=True)
class Unread:
    """A table the evaluator could not compute: where it is bound, and why."""

    name: str
    where: str  # "file:line"
    why: str


@dataclass(frozen=True)
class Figures:
    """Every vLLM table found, as the modules hold it, with where each row is written."""

    custom_ar: dict[str, dict[int, int]] | None
    symm_mem: dict[str, dict[int, int]] = field(default_factory=dict)
    multimem: dict[str, list[int]] | None = None
    nccl_symm: dict[str, Any] | None = None
    fi_fusion: dict[str, dict[int, float]] | None = None
    fi_oneshot: dict[str, dict[int, float]] | None = None
    fi_mnnvl: dict[tuple[str, int, int], float] | None = None  # ("M.m", world size, nodes) -> MB
    fi_old: dict[int, int] | None = None
    fi_world_sizes: list[int] | None = None
    where: dict[tuple[Any, ...], str] = field(default_factory=dict)  # (table, arch[, ws]) -> "file:line"
    unread: tuple[Unread, ...] = ()

    def line(self, *key: Any) -> str:
        """``file:line`` of a row, of its arch, or of its table, the most precise known."""
        for n in range(len(key), 0, -1):
            if key[:n] in self.where:
                return self.where[key[:n]]
        return ""

    def archs(self) -> list[str]:
        """Every arch a table names, in the order the tables name them."""
        names = [*(self.custom_ar or {}), *self.symm_mem, *(self.fi_fusion or {}), *(self.multimem or {})]
        names += [arch for arch, _ws, _nodes in self.fi_mnnvl or {}]
        return list(dict.fromkeys(names))


def int_arch(key: int) -> str:
    """``"10.3"`` for vLLM's ``DeviceCapability.to_int()`` key 103."""
    return f"{key // 10}.{key % 10}"


def _opaque_inside(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` holds anything computed outside the files (what the evaluator could not know)."""
    if isinstance(value, Symbol):
        return True
    if depth > 4:
        return False
    if isinstance(value, dict):
        return any(_opaque_inside(k, depth + 1) or _opaque_inside(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(_opaque_inside(v, depth + 1) for v in value)
    return False


class _Tables:
    """The tables of the modules a release reading evaluated, with their lines."""

    def __init__(self, release: ReleaseCode) -> None:
        self.release = release
        self.where: dict[tuple[Any, ...], str] = {}
        self.unread: list[Unread] = []

    def _binding(self, modules: tuple[str, ...], name: str, cls: str = "") -> tuple[str, Any, Any] | None:
        """``(module, value or None, statement)`` of the first module of ``modules`` that binds ``name``
        (in its class ``cls`` when given), then of any other module read; ``None`` when none does."""
        for where in (cls, "") if cls else ("",):  # a class attribute written alone is a top-level name
            for module in dict.fromkeys((*modules, *self.release.modules)):
                interp = self.release.modules.get(module)
                node = _statement(interp.tree, name, where) if interp is not None else None
                if interp is None or node is None:
                    continue
                values = interp.globals.values
                if where:
                    owner = values.get(where)
                    found = owner.attributes.get(name) if isinstance(owner, ClassValue) else None
                else:
                    found = values.get(name)
                return module, found, node
        return None

    def get(self, modules: tuple[str, ...], name: str, cls: str = "") -> Any:
        """The value ``name`` has in the first of ``modules`` that binds it; ``None`` when none does, or when its
        value could not be computed (then ``unread`` says where and why)."""
        found = self._binding(modules, name, cls)
        if found is None:
            return None
        module, value, node = found
        source = self.release.sources[module]
        where = f"{source.path}:{node.lineno}"
        if value is None or isinstance(value, Opaque) or _opaque_inside(value):
            interp = self.release.modules[module]
            why = interp.unbound.get(name, "its value is computed by code from outside the files read")
            self.unread.append(Unread(name, where, why))
            return None
        self.where[(name,)] = where
        self._lines(module, name, node)
        return value

    def _lines(self, module: str, name: str, node: ast.stmt, arch_of: Callable[[Any], Any] | None = None) -> None:
        """The line of each row of table ``name``: its literal's key, or the later statement that sets it."""
        source = self.release.sources[module]
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        for key, row in key_lines(value).items():
            self.where[(name, *key)] = f"{source.path}:{row}"
        tree = self.release.modules[module].tree
        for stmt in tree.body:
            if stmt.lineno <= node.lineno:
                continue
            for target in _subscript_targets(stmt):
                path = _subscript_path(target, name)
                if path:
                    self.where[(name, *path)] = f"{source.path}:{stmt.lineno}"

    def fail(self, name: str, expected: str, got: Any) -> TableError:
        return TableError(f"{self.where.get((name,), name)}: {name}: expected {expected}, got {short(got)}")

    def _unfollowed(self, name: str) -> str:
        """The first statement of the file binding ``name`` that the evaluator could not follow, if any: a table
        it left out of vLLM's shape is then what artune assumed there, not what the file holds."""
        where = self.where.get((name,), "")
        path = where.rsplit(":", 1)[0]
        for met in self.release.met.values():
            if met.what.filename == path and None in met.machines:
                return f"{met.what.construct} (line {met.what.line}: {met.what.reason}; assumed {met.what.assumed})"
        return ""

    def checked(self, name: str, value: Any, valid: bool, expected: str, got: Any) -> Any:
        """``value`` when ``valid``; else ``None`` with the table unread where the file's top level held
        something the evaluator could not follow, and ``TableError`` where it did not (not vLLM's shape)."""
        if valid:
            return value
        why = self._unfollowed(name)
        if not why:
            raise self.fail(name, expected, got)
        self.unread.append(Unread(name, self.where[(name,)], f"not vLLM's shape after {why}"))
        return None

    def size_table(self, name: str, required: bool = False) -> dict[str, dict[int, int]] | None:
        """A ``{"M.m": {world_size: bytes}}`` table."""
        value = self.get((_UTILS_MODULE,), name)
        if value is None:
            if required and self._binding((_UTILS_MODULE,), name) is None:
                found = ", ".join(s.path for s in self.release.sources.values())
                raise TableError(f"{found}: no {name} here; is this vLLM's all_reduce_utils.py?")
            return None
        expected = '{"M.m": {world_size: bytes}}'
        if not isinstance(value, dict):
            return self.checked(name, None, False, expected, value)
        for arch, rows in value.items():
            if not isinstance(arch, str) or not _ARCH.match(arch) or not isinstance(rows, dict):
                return self.checked(name, None, False, expected, {arch: rows})
            for ws, limit in rows.items():
                if type(ws) is not int or type(limit) is not int or ws < 1 or limit < 0:
                    return self.checked(
                        name, None, False, f"{expected} with int world sizes and int bytes", {ws: limit}
                    )
        return {arch: dict(rows) for arch, rows in value.items()}

    def mb_table(self, name: str) -> dict[str, dict[int, float]] | None:
        """A FlashInfer ``{major*10+minor: {world_size: MB}}`` table, keyed by ``"M.m"``."""
        value = self.get(_FUSION_MODULES, name)
        if value is None:
            return None
        expected = "{major*10+minor: {world_size: MB}}"
        if not isinstance(value, dict):
            raise self.fail(name, expected, value)
        out: dict[str, dict[int, float]] = {}
        for arch, rows in value.items():
            if type(arch) is not int or not isinstance(rows, dict):
                raise self.fail(name, expected, {arch: rows})
            for ws, mb in rows.items():
                if type(ws) is not int or ws < 1 or not _is_mb(mb):
                    raise self.fail(name, expected, {ws: mb})
            out[int_arch(arch)] = dict(rows)
        for key in [k for k in self.where if k[0] == name and len(k) > 1 and type(k[1]) is int]:
            self.where[(name, int_arch(key[1]), *key[2:])] = self.where.pop(key)
        return out

    def mnnvl_table(self) -> dict[tuple[str, int, int], float] | None:
        """``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``: ``{(major*10+minor, world_size, nodes): MB}``."""
        value = self.get((_UTILS_MODULE,), FI_MNNVL)
        if value is None:
            return None
        expected = "{(major*10+minor, world_size, nodes): MB}"
        if not isinstance(value, dict):
            raise self.fail(FI_MNNVL, expected, value)
        out: dict[tuple[str, int, int], float] = {}
        for key, mb in value.items():
            ok = isinstance(key, tuple) and len(key) == 3 and all(type(k) is int and k > 0 for k in key)
            if not ok or not _is_mb(mb):
                raise self.fail(FI_MNNVL, expected, {key: mb})
            out[(int_arch(key[0]), key[1], key[2])] = mb
        for key in [k for k in self.where if k[0] == FI_MNNVL and len(k) == 2 and isinstance(k[1], tuple)]:
            cap, ws, nodes = key[1]
            self.where[(FI_MNNVL, int_arch(cap), ws, nodes)] = self.where.pop(key)
        return out


def _is_mb(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0


def _statement(tree: ast.Module, name: str, cls: str = "") -> ast.stmt | None:
    """The first top-level (or class ``cls`` level) statement that binds ``name``."""
    body = tree.body
    if cls:
        owner = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == cls), None)
        body = owner.body if owner is not None else []
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return stmt
    return None


def _subscript_targets(stmt: ast.stmt) -> list[ast.Subscript]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AugAssign) else []
    return [t for t in targets if isinstance(t, ast.Subscript)]


def _subscript_path(node: ast.expr, name: str) -> tuple[Any, ...]:
    """``("10.7", 8)`` for ``NAME["10.7"][8]``; () for a subscript of anything else or with a computed key."""
    keys: list[Any] = []
    while isinstance(node, ast.Subscript):
        try:
            keys.append(ast.literal_eval(node.slice))
        except ValueError:
            return ()
        node = node.value
    return tuple(reversed(keys)) if isinstance(node, ast.Name) and node.id == name else ()


def key_lines(node: ast.expr | None, prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Line of every literal key of a (nested) dict literal: ``{(outer,): line, (outer, inner): line}``."""
    out: dict[tuple[Any, ...], int] = {}
    if not isinstance(node, ast.Dict):
        return out
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            continue
        try:
            literal = ast.literal_eval(key)
        except ValueError:
            continue
        out[(*prefix, literal)] = key.lineno
        out.update(key_lines(value, (*prefix, literal)))
    return out


def _is_multimem(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, (list, tuple)) and all(type(w) is int for w in v) for k, v in value.items()
    )


def read_figures(release: ReleaseCode) -> Figures:
    """Every vLLM table the evaluated ``release`` holds; ``TableError`` naming a table that is not vLLM's shape.

    Without ``all_reduce_utils.py``'s tables (vLLM 0.10.1 and older) ``custom_ar``
    is ``None``, provided ``custom_all_reduce.py`` is there to say what runs.
    """
    tables = _Tables(release)
    predates = _CUSTOM_MODULE in release.modules and tables._binding((_UTILS_MODULE,), CUSTOM_AR) is None
    custom_ar = None if predates else tables.size_table(CUSTOM_AR, required=True)
    symm = tables.size_table(SYMM_MEM)
    multimem = tables.get((_SYMM_MODULE,), MULTIMEM, cls="SymmMemCommunicator")
    if multimem is not None and not _is_multimem(multimem):
        raise tables.fail(MULTIMEM, '{"M.m": [world sizes]}', multimem)
    nccl = tables.get((_UTILS_MODULE,), NCCL_SYMM)
    if nccl is not None and not (isinstance(nccl, dict) and set(nccl) <= _NCCL_SYMM_KEYS):
        raise tables.fail(NCCL_SYMM, f"a dict with keys among {sorted(_NCCL_SYMM_KEYS)}", nccl)
    fi_fusion, fi_oneshot = tables.mb_table(FI_FUSION), tables.mb_table(FI_ONESHOT)
    fi_old = tables.get(_FUSION_MODULES, FI_OLD)
    if fi_old is not None and not (
        isinstance(fi_old, dict) and all(type(k) is int and type(w) is int for k, w in fi_old.items())
    ):
        raise tables.fail(FI_OLD, "{world_size: bytes}", fi_old)
    supported = tables.get(_FUSION_MODULES, "FI_SUPPORTED_WORLD_SIZES")
    return Figures(
        custom_ar=custom_ar,
        symm_mem=symm if symm is not None else {},
        multimem=None if multimem is None else {k: list(v) for k, v in multimem.items()},
        nccl_symm=nccl,
        fi_fusion=fi_fusion,
        fi_oneshot=fi_oneshot,
        fi_mnnvl=tables.mnnvl_table(),
        fi_old=fi_old,
        fi_world_sizes=list(supported) if isinstance(supported, (list, tuple)) else None,
        where=tables.where,
        unread=tuple(tables.unread),
    )
