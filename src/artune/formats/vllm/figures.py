"""vLLM's all-reduce tables and dispatch as data: each file's constant expressions and the facts of its code.

vLLM's tables are data, so they are read as data: each file is parsed with
``ast`` and only constant expressions are evaluated (numbers, ``+ - * / //``,
names bound earlier such as ``MiB``, dict/list/tuple literals), by
``artune.formats.pyeval`` in its restricted mode. vLLM is never imported.
How vLLM uses them is code, and the few facts of it that decide a size are
read from the code's shape (``Code``): the order in which
``CudaCommunicator.all_reduce`` tries its paths, ``CustomAllreduce``'s
default buffer, world sizes and whether its table row needs symmetric
memory, each comparison's ``<`` or ``<=``, and the defaults of the
environment variables that switch each path on (``envs.py``). A shape this
reader does not know is an error naming the file and line.

Files (any subset; ``all_reduce_utils.py`` is required unless the release
predates it, as vLLM 0.10.1 and older do):

- ``all_reduce_utils.py``: ``CUSTOM_ALL_REDUCE_MAX_SIZES`` and
  ``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` (``"M.m"`` -> world size -> bytes),
  ``NCCL_SYMM_MEM_ALL_REDUCE_CONFIG`` (old ``thresholds`` or new
  ``custom_ar_preferred_ranges``) and ``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``
  (``(major*10+minor, world size, nodes)`` -> MB, vLLM 0.29 on);
- ``symm_mem.py``: ``SymmMemCommunicator._WORLD_SIZES_MULTIMEM`` and whether
  ``should_use_symm_mem`` compares ``<=`` (vLLM 0.22 on) or ``<``;
- ``custom_all_reduce.py``, ``cuda_communicator.py``,
  ``flashinfer_all_reduce.py``, ``envs.py``, ``parallel_state.py``: the code
  facts above;
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

from artune.errors import TableError, Unsupported
from artune.formats.engine import short
from artune.formats.files import SourceFile
from artune.formats.pyeval import assignments, constants
from artune.formats.pyeval.expressions import Evaluator
from artune.formats.pyeval.values import Scope, Symbol

_COMM = "vllm/distributed/device_communicators/"
UTILS = _COMM + "all_reduce_utils.py"
CUSTOM_AR_FILE = _COMM + "custom_all_reduce.py"
FILES = (
    UTILS,
    _COMM + "symm_mem.py",
    CUSTOM_AR_FILE,
    _COMM + "cuda_communicator.py",
    _COMM + "flashinfer_all_reduce.py",
    "vllm/envs.py",
    "vllm/distributed/parallel_state.py",
    "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
    "vllm/compilation/collective_fusion.py",
)
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
#: the environment variables that switch an all-reduce path on or off, and how (envs.py)
ENV_NAMES = (
    "VLLM_ALLREDUCE_USE_SYMM_MEM",  # torch symmetric memory
    "VLLM_ALLREDUCE_USE_FLASHINFER",  # FlashInfer's standalone all-reduce
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND",  # auto: MNNVL on one host (falls back to TRT-LLM without multicast)
    "VLLM_USE_NCCL_SYMM_MEM",  # NCCL symmetric memory
    "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC",
    "VLLM_BATCH_INVARIANT",  # turns the non-deterministic paths off
)
#: the paths of CudaCommunicator.all_reduce artune plans, by the call that asks each whether it takes a message
DISPATCH_CALLS = {
    ("fi_ar_comm", "should_use_fi_ar"): "flashinfer_ar",
    ("ca_comm", "should_custom_ar"): "custom_ar",
    ("symm_mem_comm", "should_use_symm_mem"): "symm_mem",
}


@dataclass(frozen=True)
class Code:
    """What vLLM's code does with its tables, read from its shape; ``None``: that file was not read."""

    env: dict[str, Any] | None = None  # default of each of ENV_NAMES that envs.py defines
    custom_ar_max: int | None = None  # CustomAllreduce.__init__'s max_size default (8192 * 1024)
    custom_ar_world_sizes: tuple[int, ...] | None = None  # _SUPPORTED_WORLD_SIZES
    custom_ar_ws_limit: int | None = None  # should_custom_ar's "world_size > N: no" guard (vLLM 0.27 on)
    custom_ar_inclusive: bool = False  # should_custom_ar compares inp_size <= max_size
    custom_ar_needs_symm: bool = True  # the table row applies only when symmetric memory started
    custom_ar_checks_ws: bool = False  # a world size missing from a listed arch's row keeps 8 MiB (else KeyError)
    custom_ar_enabled: bool | None = None  # parallel_state._ENABLE_CUSTOM_ALL_REDUCE
    order: tuple[str, ...] | None = None  # the planned paths in CudaCommunicator.all_reduce's order
    fi_inclusive: bool | None = True  # should_use_fi_ar refuses nbytes > max_workspace_size (None: no such test)
    fi_tuned_offset: int = 0  # _get_tuned_standalone_max_size: int(mb * MiB) + offset (-1: exclusive)
    #: across hosts: the capability _resolve_fi_ar_backend asks before it picks mnnvl for a multi-node group
    #: (``has_device_capability(100)``, vLLM 0.32 on; 0: none asked)
    fi_multinode_cc: int = 0
    #: CustomAllreduce's mnnvl_only mode across hosts (vLLM 0.27 on): the capability _group_can_attempt_mnnvl
    #: asks (0: none asked); None: the release disables CustomAllreduce across nodes
    custom_ar_mnnvl_cc: int | None = None
    symm_rendezvous_caught: bool = True  # SymmMemCommunicator catches a failed rendezvous (vLLM 0.11.1 on)
    files: tuple[str, ...] = ()  # which of the code files were read


@dataclass(frozen=True)
class Figures:
    """Every vLLM table found, as evaluated, with where each row is written, and the facts of the code."""

    custom_ar: dict[str, dict[int, int]] | None
    symm_mem: dict[str, dict[int, int]] = field(default_factory=dict)
    multimem: dict[str, list[int]] | None = None
    nccl_symm: dict[str, Any] | None = None
    fi_fusion: dict[str, dict[int, float]] | None = None
    fi_oneshot: dict[str, dict[int, float]] | None = None
    fi_mnnvl: dict[tuple[str, int, int], float] | None = None  # ("M.m", world size, nodes) -> MB
    fi_old: dict[int, int] | None = None
    fi_world_sizes: list[int] | None = None
    symm_inclusive: bool = False
    code: Code = field(default_factory=Code)
    where: dict[tuple[Any, ...], str] = field(default_factory=dict)  # (table, arch[, ws]) -> "file:line"

    def line(self, *key: Any) -> str:
        """``file:line`` of a row, of its arch, or of its table, the most precise known."""
        for n in range(len(key), 0, -1):
            if key[:n] in self.where:
                return self.where[key[:n]]
        return ""


def int_arch(key: int) -> str:
    """``"10.3"`` for vLLM's ``DeviceCapability.to_int()`` key 103."""
    return f"{key // 10}.{key % 10}"


class _FigureReader:
    """The files' constant bindings by name (the first file that binds a name wins), and their nodes."""

    def __init__(self, files: list[SourceFile]) -> None:
        self.files = files
        self.values: dict[str, Any] = {}
        self.nodes: dict[str, tuple[SourceFile, ast.expr | None, int]] = {}
        self.trees: dict[str, tuple[SourceFile, ast.Module]] = {}  # file name -> its AST
        self.symm_inclusive = False
        self.where: dict[tuple[Any, ...], str] = {}
        for source in files:
            values, _lines, tree = constants(source.text, source.path)
            self.trees[source.path.rsplit("/", 1)[-1]] = (source, tree)
            for prefix, stmt in assignments(tree):
                for short_name in _names(stmt):
                    if short_name in self.nodes:
                        continue
                    self.nodes[short_name] = (source, stmt.value, stmt.lineno)
                    if prefix + short_name in values:
                        self.values[short_name] = values[prefix + short_name]
            if _compares(_method(tree, "SymmMemCommunicator", "should_use_symm_mem"), "max_size") is ast.LtE:
                self.symm_inclusive = True
            elif _compares(_function(tree, "should_use_symm_mem"), "max_size") is ast.LtE:
                self.symm_inclusive = True  # a lone symm_mem.py given as the file

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

    def lines(self, name: str, arch_of: Callable[[Any], Any] | None = None) -> None:
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
                if type(ws) is not int or ws < 1 or not _is_mb(mb):
                    raise self.fail(name, expected, {ws: mb})
            out[int_arch(arch)] = rows
        self.lines(name, arch_of=int_arch)
        return out

    def mnnvl_table(self) -> dict[tuple[str, int, int], float] | None:
        """``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``: ``{(major*10+minor, world_size, nodes): MB}``."""
        value = self.get(FI_MNNVL)
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
        source, node, line = self.nodes[FI_MNNVL]
        self.where[(FI_MNNVL,)] = f"{source.path}:{line}"
        for key, row in key_lines(node).items():
            (cap, ws, nodes) = key[0]
            self.where[(FI_MNNVL, int_arch(cap), ws, nodes)] = f"{source.path}:{row}"
        return out


def _is_mb(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0


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


# ------------------------------------------------------------------ the code's shape


def _function(tree: ast.Module | None, name: str) -> ast.FunctionDef | None:
    """The module-level ``def name``."""
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _method(tree: ast.Module | None, cls: str, name: str) -> ast.FunctionDef | None:
    """``cls.name`` of a module-level class."""
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def _compares(func: ast.FunctionDef | None, attribute: str) -> type[ast.cmpop] | None:
    """The operator of the first comparison in ``func`` whose right side names ``attribute`` (``self.max_size``)."""
    for node in ast.walk(func) if func is not None else ():
        if isinstance(node, ast.Compare) and attribute in ast.unparse(node.comparators[-1]):
            return type(node.ops[-1])
    return None


def _env_defaults(tree: ast.Module) -> dict[str, Any]:
    """The default of each of ``ENV_NAMES`` in ``envs.py``'s ``environment_variables``, with no variable set.

    Each entry is ``"NAME": lambda: bool(int(os.getenv("NAME", "1")))`` or
    ``env_with_choices("NAME", "auto", [...])``; the lambda's body is
    evaluated by the restricted evaluator with ``os.getenv`` answering its
    default, so the value is the one vLLM computes in an empty environment.
    """
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in ENV_NAMES and key.value not in out:
                out[key.value] = _env_default(key.value, value)
    return out


def _getenv(name: str, default: Any = None) -> Any:
    return default  # vLLM with no variable set


def _env_default(name: str, node: ast.expr) -> Any:
    if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value  # env_with_choices(NAME, DEFAULT, CHOICES)
    if isinstance(node, ast.Lambda) and not node.args.args:
        evaluator = Evaluator("envs.py", fakes={"os.getenv": _getenv, "os.environ.get": _getenv})
        try:
            return evaluator.eval(node.body, Scope({"os": Symbol("os")}))
        except Unsupported as err:
            raise TableError(f"envs.py:{node.lineno}: the default of {name} is not understood: {err}") from None
    raise TableError(f"envs.py:{node.lineno}: {name} = {ast.unparse(node)[:60]} is not a shape this reader knows")


def _dispatch_order(func: ast.FunctionDef) -> tuple[str, ...]:
    """The planned paths in the order ``CudaCommunicator.all_reduce`` first asks each of them."""
    calls: list[tuple[int, int, str]] = []
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            path = DISPATCH_CALLS.get((name, node.func.attr))
            if path is not None:
                calls.append((node.lineno, node.col_offset, path))
    return tuple(dict.fromkeys(path for _line, _col, path in sorted(calls)))


def _int_constant(node: ast.expr | None, where: str) -> int:
    values, _lines, _tree = constants(f"X = {ast.unparse(node)}\n" if node is not None else "", where)
    value = values.get("X")
    if type(value) is not int:
        raise TableError(f"{where}: expected an int constant, got {ast.unparse(node) if node else None}")
    return value


def _custom_ar_facts(source: SourceFile, tree: ast.Module) -> dict[str, Any]:
    init = _method(tree, "CustomAllreduce", "__init__")
    should = _method(tree, "CustomAllreduce", "should_custom_ar")
    if init is None or should is None:
        raise TableError(f"{source.path}: no CustomAllreduce.__init__ / should_custom_ar here; is this vLLM's file?")
    args = init.args.args[len(init.args.args) - len(init.args.defaults) :]
    defaults = dict(zip((a.arg for a in args), init.args.defaults, strict=True))
    if "max_size" not in defaults:
        raise TableError(f"{source.path}:{init.lineno}: CustomAllreduce.__init__ has no max_size default")
    limit = None
    for node in ast.walk(should):
        if (
            isinstance(node, ast.Compare)
            and ast.unparse(node.left) == "self.world_size"
            and isinstance(node.ops[0], ast.Gt)
            and isinstance(node.comparators[0], ast.Constant)
        ):
            limit = node.comparators[0].value
    compare = _compares(should, "self.max_size")
    if compare not in (ast.Lt, ast.LtE):
        raise TableError(f"{source.path}:{should.lineno}: should_custom_ar: no 'inp_size < self.max_size' here")
    text = ast.unparse(init)
    mnnvl = _function(tree, "_group_can_attempt_mnnvl")
    return {
        "custom_ar_mnnvl_cc": (_capability_asked(mnnvl) if mnnvl is not None else 0)
        if "self.mnnvl_only" in text
        else None,
        "custom_ar_max": _int_constant(defaults["max_size"], f"{source.path}:{init.lineno}"),
        "custom_ar_ws_limit": limit,
        "custom_ar_inclusive": compare is ast.LtE,
        "custom_ar_needs_symm": "symm_mem_enabled" in text,
        "custom_ar_checks_ws": f"world_size in {CUSTOM_AR}[" in text,
    }


def _flashinfer_facts(source: SourceFile, tree: ast.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    should = _method(tree, "FlashInferAllReduce", "should_use_fi_ar")
    if should is not None:
        # it refuses what is larger, so the bound itself runs; older releases (FlashInfer off by default)
        # bound only the token count, a shape this reader does not plan
        compare = _compares(should, "self.max_workspace_size")
        out["fi_inclusive"] = {ast.Gt: True, ast.GtE: False}.get(compare)  # type: ignore[call-overload]
    backend = _function(tree, "_resolve_fi_ar_backend")
    out["fi_multinode_cc"] = _capability_asked(backend) if backend is not None else 0
    tuned = _function(tree, "_get_tuned_standalone_max_size")
    for node in ast.walk(tuned) if tuned is not None else ():
        if isinstance(node, ast.Return) and isinstance(node.value, ast.IfExp):
            # evaluate "int(max_size_mb * MiB) - 1" at 1 MB: the offset from the bound as written
            evaluator = Evaluator(source.path, restricted=True)
            value = evaluator.eval(node.value.orelse, Scope({"max_size_mb": 1, "MiB": 1 << 20}))
            out["fi_tuned_offset"] = value - (1 << 20)
    return out


def _capability_asked(func: ast.FunctionDef) -> int:
    """The capability ``func`` asks ``has_device_capability(N, ...)`` for (0: none)."""
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "has_device_capability"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and type(node.args[0].value) is int
        ):
            return node.args[0].value
    return 0


def _rendezvous_caught(tree: ast.Module) -> bool:
    """Whether ``SymmMemCommunicator.__init__`` calls torch's ``rendezvous`` inside a ``try`` that catches
    ``RuntimeError`` (or ``Exception``)."""
    init = _method(tree, "SymmMemCommunicator", "__init__")
    calls = init is not None and any(isinstance(n, ast.Attribute) and n.attr == "rendezvous" for n in ast.walk(init))
    if not calls:
        return True  # no rendezvous here (a file with only the tables): nothing said to raise
    for node in ast.walk(init):  # type: ignore[arg-type]
        if isinstance(node, ast.Try) and any(
            isinstance(n, ast.Attribute) and n.attr == "rendezvous" for stmt in node.body for n in ast.walk(stmt)
        ):
            caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            return bool(caught & {"RuntimeError", "Exception"}) or any(h.type is None for h in node.handlers)
    return False


def read_code(reader: _FigureReader) -> Code:
    """The facts of vLLM's code in the files read (defaults where a file is absent)."""
    facts: dict[str, Any] = {}
    found: list[str] = []
    trees = reader.trees
    if "envs.py" in trees:
        facts["env"] = _env_defaults(trees["envs.py"][1])
        found.append("envs.py")
    if "custom_all_reduce.py" in trees:
        facts.update(_custom_ar_facts(*trees["custom_all_reduce.py"]))
        sizes = reader.get("_SUPPORTED_WORLD_SIZES")
        if not isinstance(sizes, (list, tuple)) or not all(type(w) is int for w in sizes):
            raise TableError(f"{trees['custom_all_reduce.py'][0].path}: no _SUPPORTED_WORLD_SIZES list of ints")
        facts["custom_ar_world_sizes"] = tuple(sizes)
        found.append("custom_all_reduce.py")
    if "cuda_communicator.py" in trees:
        source, tree = trees["cuda_communicator.py"]
        func = _method(tree, "CudaCommunicator", "all_reduce")
        if func is None:
            raise TableError(f"{source.path}: no CudaCommunicator.all_reduce here; is this vLLM's file?")
        facts["order"] = _dispatch_order(func)
        if "custom_ar" not in facts["order"]:
            raise TableError(f"{source.path}:{func.lineno}: CudaCommunicator.all_reduce never asks should_custom_ar")
        found.append("cuda_communicator.py")
    if "flashinfer_all_reduce.py" in trees:
        facts.update(_flashinfer_facts(*trees["flashinfer_all_reduce.py"]))
        found.append("flashinfer_all_reduce.py")
    if "symm_mem.py" in trees:
        facts["symm_rendezvous_caught"] = _rendezvous_caught(trees["symm_mem.py"][1])
    if "parallel_state.py" in trees:
        enabled = reader.values.get("_ENABLE_CUSTOM_ALL_REDUCE")
        facts["custom_ar_enabled"] = enabled if isinstance(enabled, bool) else None
        found.append("parallel_state.py")
    return Code(**facts, files=tuple(found))


def _is_multimem(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, (list, tuple)) and all(type(w) is int for w in v) for k, v in value.items()
    )


def read_figures(files: list[SourceFile]) -> Figures:
    """Evaluate every vLLM table in ``files``; ``TableError`` naming the construct it cannot read.

    Without ``all_reduce_utils.py`` (vLLM 0.10.1 and older) ``custom_ar`` is
    ``None``, provided ``custom_all_reduce.py`` is there to say what runs.
    """
    reader = _FigureReader(files)
    predates = "custom_all_reduce.py" in reader.trees and CUSTOM_AR not in reader.nodes
    custom_ar = None if predates else reader.size_table(CUSTOM_AR, required=True)
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
        fi_mnnvl=reader.mnnvl_table(),
        fi_old=fi_old,
        fi_world_sizes=list(supported) if isinstance(supported, (list, tuple)) else None,
        symm_inclusive=reader.symm_inclusive,
        code=read_code(reader),
        where=reader.where,
    )
