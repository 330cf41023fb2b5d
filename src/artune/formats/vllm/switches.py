"""vLLM's switches as a release computes them: those its dispatch tests, with every value it documents
(``tested``: what ``verify-engine`` probes under), and the ROCm ones with which decided an answer (``explain``
on a gfx arch).

Each value is the release's own ``envs.py`` evaluated (``ReleaseCode.env``)
with only the variables given set, so a default is the release's default.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from artune.formats.vllm.code import ReleaseCode
from artune.formats.vllm.read import _files, reading

LEVEL = "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION"
CAST = "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16"
MAX = "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB"
MIN = "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB"
AITER = "VLLM_ROCM_USE_AITER"
AITER_AR = "VLLM_ROCM_USE_AITER_CUSTOM_AR"
#: the switches vLLM's ROCm all-reduce dispatch reads, in the order ``explain`` lists them
NAMES = (LEVEL, CAST, MAX, MIN, AITER, AITER_AR)


@dataclass(frozen=True)
class Switch:
    """One environment variable as the release reads it: its value, and whether the user set it."""

    name: str
    value: Any
    set: bool

    def __str__(self) -> str:
        return f"{self.name}={self.value}" + ("" if self.set else " (default)")


def switches(path: str, settings: Mapping[str, str] | None = None) -> dict[str, Switch]:
    """The ROCm switches the release at ``path`` defines, with ``settings`` set (the rest at its defaults)."""
    release = ReleaseCode(_files(path), settings)
    out = {}
    for name in NAMES:
        status, value = release.env(name)
        if status == "value":
            out[name] = Switch(name, value, name in (settings or {}))
    return out


#: variables set, as ``(name, value)`` pairs
Setting = tuple[tuple[str, str], ...]


def tested(path: str, platform: str = "cuda") -> tuple[Setting, ...]:
    """Each setting of the switches the release at ``path`` tests in its dispatch on ``platform`` to a value other
    than its default: the variables its communicators and all-reduce read while the reading evaluated them
    (``ReleaseCode.variables``) that ``envs.py`` declares ``bool`` (set as ``1`` and ``0``) or ``Literal[...]``
    (each value it lists); a free value (a size, a path) is no switch. Only the values that change what
    ``envs.NAME`` gives are kept. One variable a setting, and then, under each, every value of a switch that
    only that setting makes the dispatch read, with it (one level: a switch a branch off by default tests)."""
    release = reading(path)[1]
    source = release.sources.get("vllm.envs")
    if source is None:
        return ()
    declared = _declared(source.text)
    first = release.variables(platform)
    out: list[Setting] = [(pair,) for pair in _values(release, declared, first)]
    for setting in list(out):
        under = reading(path, dict(setting))[1]
        out += [(*setting, pair) for pair in _values(under, declared, under.variables(platform) - first)]
    return tuple(out)


def _values(release: ReleaseCode, declared: Mapping[str, tuple[str, ...]], names: set[str]) -> list[tuple[str, str]]:
    """``(name, value)`` for each of ``names`` ``declared`` and each of its values but its default there."""
    out: list[tuple[str, str]] = []
    for name in sorted(names):
        status, default = release.env(name)
        if status == "value" and name in declared:
            out += [(name, text) for text in declared[name] if _under(release, name, text) != ("value", default)]
    return out


def _declared(text: str) -> dict[str, tuple[str, ...]]:
    """The values each variable of ``envs.py``'s ``if TYPE_CHECKING:`` declarations can be set to: ``1`` and
    ``0`` for a ``bool``, each of a ``Literal[...]``'s strings; a variable of any other type is left out."""
    out: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        kind = node.annotation
        if isinstance(kind, ast.Name) and kind.id == "bool":
            out[node.target.id] = ("1", "0")
        elif isinstance(kind, ast.Subscript) and isinstance(kind.value, ast.Name) and kind.value.id == "Literal":
            items = kind.slice.elts if isinstance(kind.slice, ast.Tuple) else [kind.slice]
            values = tuple(i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))
            if values:
                out[node.target.id] = values
    return out


def _under(release: ReleaseCode, name: str, text: str) -> tuple[str, Any]:
    """``envs.NAME`` with ``NAME`` set to ``text`` (the release's ``envs.py`` run on it, nothing else re-read)."""
    stage = release.stage
    saved = stage.settings
    stage.settings = {**saved, name: text}
    try:
        return release.env(name)
    finally:
        stage.settings = saved


def decided_by(algorithm: str, found: Mapping[str, Switch]) -> str:
    """The switch that decided ``algorithm`` on ROCm, and how, in one line."""
    level, aiter = found.get(LEVEL), found.get(AITER)
    aiter_ar = found.get(AITER_AR)
    if algorithm.startswith("quick_ar_"):
        cast = found.get(CAST)
        rows = "float16 rows (bfloat16 cast)" if cast is not None and cast.value else "the dtype's own rows"
        cap = found.get(MAX)
        top = f"up to {cap}" if cap is not None and cap.set else "up to ops.qr_max_size() (2 GiB)"
        return f"{level}: QuickReduce at this level, from _QR_MIN_SIZE's {rows} {top}"
    if algorithm == "aiter_ar":
        return f"{aiter} and {aiter_ar}: AITER's custom all-reduce takes vLLM's own's place"
    off = f"{aiter}" if aiter is not None else "no AITER switch in this release"
    quick = f"{level}" if level is not None else "no QuickReduce switch"
    if algorithm == "custom_ar":
        return f"{off}: vLLM's own custom all-reduce (AITER's is off); {quick}: QuickReduce does not take this size"
    return f"{quick} and {off}: no custom path takes this size, so the process group's all-reduce runs"


__all__ = ["NAMES", "Switch", "decided_by", "switches", "tested"]
