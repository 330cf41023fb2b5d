"""vLLM's all-reduce tables as data: each file's constant expressions, validated, with the line of every row.

vLLM's tables are data, so they are read as data: each file is parsed with
``ast`` and only constant expressions are evaluated (numbers, ``+ - * / //``,
names bound earlier such as ``MiB``, dict/list/tuple literals), by
``artune.formats.pyeval`` in its restricted mode. vLLM is never imported.

Files (any subset; ``all_reduce_utils.py`` is required):

- ``all_reduce_utils.py``: ``CUSTOM_ALL_REDUCE_MAX_SIZES`` and
  ``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` (``"M.m"`` -> world size -> bytes), and
  ``NCCL_SYMM_MEM_ALL_REDUCE_CONFIG`` (old ``thresholds`` or new
  ``custom_ar_preferred_ranges``);
- ``symm_mem.py``: ``SymmMemCommunicator._WORLD_SIZES_MULTIMEM`` and whether
  ``should_use_symm_mem`` compares ``<=`` (newest) or ``<`` (older);
- the FlashInfer fusion file: ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` and
  ``_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB`` (int arch ``major*10+minor``, MB
  floats), or the older world-size-only ``_FI_MAX_SIZES``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from artune.errors import TableError
from artune.formats.engine import short
from artune.formats.pyeval import assignments, constants
from artune.formats.source import SourceFile

FILES = (
    "vllm/distributed/device_communicators/all_reduce_utils.py",
    "vllm/distributed/device_communicators/symm_mem.py",
    "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
    "vllm/compilation/collective_fusion.py",
)
CUSTOM_AR = "CUSTOM_ALL_REDUCE_MAX_SIZES"
SYMM_MEM = "SYMM_MEM_ALL_REDUCE_MAX_SIZES"
MULTIMEM = "_WORLD_SIZES_MULTIMEM"
NCCL_SYMM = "NCCL_SYMM_MEM_ALL_REDUCE_CONFIG"
FI_FUSION = "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"
FI_ONESHOT = "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB"
FI_OLD = "_FI_MAX_SIZES"
_NCCL_SYMM_KEYS = {"min_world_size", "thresholds", "custom_ar_preferred_ranges", "always_use_above_world_size"}
_ARCH = re.compile(r"^\d+\.\d+$")


@dataclass(frozen=True)
class Figures:
    """Every vLLM table found, as evaluated, with where each row is written."""

    custom_ar: dict[str, dict[int, int]]
    symm_mem: dict[str, dict[int, int]] = field(default_factory=dict)
    multimem: dict[str, list[int]] | None = None
    nccl_symm: dict[str, Any] | None = None
    fi_fusion: dict[str, dict[int, float]] | None = None
    fi_oneshot: dict[str, dict[int, float]] | None = None
    fi_old: dict[int, int] | None = None
    fi_world_sizes: list[int] | None = None
    symm_inclusive: bool = False
    where: dict[tuple[Any, ...], str] = field(default_factory=dict)  # (table, arch[, ws]) -> "file:line"

    def line(self, *key: Any) -> str:
        """``file:line`` of a row, of its arch, or of its table, the most precise known."""
        for n in range(len(key), 0, -1):
            if key[:n] in self.where:
                return self.where[key[:n]]
        return ""


def _int_arch(key: int) -> str:
    return f"{key // 10}.{key % 10}"


class _Reader:
    """The files' constant bindings by name (the first file that binds a name wins), and their nodes."""

    def __init__(self, files: list[SourceFile]) -> None:
        self.files = files
        self.values: dict[str, Any] = {}
        self.nodes: dict[str, tuple[SourceFile, ast.expr | None, int]] = {}
        self.symm_inclusive = False
        self.where: dict[tuple[Any, ...], str] = {}
        for source in files:
            values, _lines, tree = constants(source.text, source.path)
            for prefix, stmt in assignments(tree):
                for short_name in _names(stmt):
                    if short_name in self.nodes:
                        continue
                    self.nodes[short_name] = (source, stmt.value, stmt.lineno)
                    if prefix + short_name in values:
                        self.values[short_name] = values[prefix + short_name]
            if _compares_inclusive(tree):
                self.symm_inclusive = True

    def get(self, name: str, required: bool = False) -> Any:
        """The value bound to ``name``; ``None`` when no file binds it (unless ``required``)."""
        if name not in self.nodes:
            if required:
                found = ", ".join(f.path for f in self.files)
                raise TableError(f"{found}: no {name} here; is this vLLM's all_reduce_utils.py?")
            return None
        source, node, line = self.nodes[name]
        if name not in self.values:
            text = ast.unparse(node)[:60] if node is not None else ""
            raise TableError(
                f"{source.path}:{line}: {name} = {text}... is not a constant expression this reader understands "
                "(numbers, + - * / //, names bound earlier, dict/list/tuple literals)"
            )
        return self.values[name]

    def table(self, name: str, check: Callable[[Any], bool], expected: str) -> Any:
        """``name``'s value when ``check`` accepts it, its lines recorded; ``None`` when absent."""
        value = self.get(name)
        if value is None:
            return None
        if not check(value):
            raise self.fail(name, expected, value)
        self.lines(name)
        return value

    def lines(self, name: str, arch_of: Callable[[Any], str] | None = None) -> None:
        """Record ``file:line`` of the table ``name`` and of each of its rows (``arch_of`` renames first keys)."""
        source, node, line = self.nodes[name]
        self.where[(name,)] = f"{source.path}:{line}"
        for key, row in key_lines(node).items():
            first = key[0] if arch_of is None else arch_of(key[0])
            self.where[(name, first, *key[1:])] = f"{source.path}:{row}"

    def fail(self, name: str, expected: str, got: Any) -> TableError:
        source, _node, line = self.nodes[name]
        return TableError(f"{source.path}:{line}: {name}: expected {expected}, got {short(got)}")

    def size_table(self, name: str, required: bool = False) -> dict[str, dict[int, int]] | None:
        """A ``{"M.m": {world_size: bytes}}`` table."""
        value = self.get(name, required)
        if value is None:
            return None
        expected = '{"M.m": {world_size: bytes}}'
        if not isinstance(value, dict):
            raise self.fail(name, expected, value)
        for arch, rows in value.items():
            if not isinstance(arch, str) or not _ARCH.match(arch) or not isinstance(rows, dict):
                raise self.fail(name, expected, {arch: rows})
            for ws, limit in rows.items():
                if type(ws) is not int or type(limit) is not int or ws < 1 or limit < 0:
                    raise self.fail(name, f"{expected} with int world sizes and int bytes", {ws: limit})
        self.lines(name)
        return value

    def mb_table(self, name: str) -> dict[str, dict[int, float]] | None:
        """A FlashInfer ``{major*10+minor: {world_size: MB}}`` table, keyed by ``"M.m"``."""
        value = self.get(name)
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
                if type(ws) is not int or ws < 1 or isinstance(mb, bool) or not isinstance(mb, (int, float)) or mb < 0:
                    raise self.fail(name, expected, {ws: mb})
            out[_int_arch(arch)] = rows
        self.lines(name, arch_of=_int_arch)
        return out


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


def _names(stmt: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _compares_inclusive(tree: ast.Module) -> bool:
    """Whether ``should_use_symm_mem`` compares ``nbytes <= self.max_size`` (newest vLLM)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "should_use_symm_mem":
            for cmp in ast.walk(node):
                if isinstance(cmp, ast.Compare) and "max_size" in ast.unparse(cmp.comparators[-1]):
                    return isinstance(cmp.ops[-1], ast.LtE)
    return False


def _is_multimem(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, (list, tuple)) and all(type(w) is int for w in v) for k, v in value.items()
    )


def read_figures(files: list[SourceFile]) -> Figures:
    """Evaluate every vLLM table in ``files``; ``TableError`` naming the construct it cannot read."""
    reader = _Reader(files)
    custom_ar = reader.size_table(CUSTOM_AR, required=True)
    assert custom_ar is not None
    symm = reader.size_table(SYMM_MEM)
    multimem = reader.table(MULTIMEM, _is_multimem, '{"M.m": [world sizes]}')
    nccl = reader.table(
        NCCL_SYMM,
        lambda v: isinstance(v, dict) and set(v) <= _NCCL_SYMM_KEYS,
        f"a dict with keys among {sorted(_NCCL_SYMM_KEYS)}",
    )
    fi_fusion, fi_oneshot = reader.mb_table(FI_FUSION), reader.mb_table(FI_ONESHOT)
    fi_old = reader.table(
        FI_OLD,
        lambda v: isinstance(v, dict) and all(type(k) is int and type(w) is int for k, w in v.items()),
        "{world_size: bytes}",
    )
    supported = reader.get("FI_SUPPORTED_WORLD_SIZES")
    return Figures(
        custom_ar=custom_ar,
        symm_mem=symm if symm is not None else {},
        multimem=None if multimem is None else {k: list(v) for k, v in multimem.items()},
        nccl_symm=nccl,
        fi_fusion=fi_fusion,
        fi_oneshot=fi_oneshot,
        fi_old=fi_old,
        fi_world_sizes=list(supported) if isinstance(supported, (list, tuple)) else None,
        symm_inclusive=reader.symm_inclusive,
        where=reader.where,
    )
