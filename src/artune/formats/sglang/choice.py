"""Which communicator SGLang builds for a group, and its legacy one: ``custom_all_reduce.py``, interpreted.

``GroupCoordinator`` asks ``dispatch_custom_allreduce`` for a class and builds
it (where the constructor raises, it logs "Setup Custom allreduce failed" and
runs NCCL). On CUDA the function answers ``CustomAllReduceV2`` where v2 is on
(``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2``, by default from 0.5.12;
``SGLANG_USE_JIT_ALL_REDUCE=1`` before) and, from 0.5.13, where
``can_use_custom_all_reduce_v2`` admits the group; otherwise the legacy
``CustomAllreduce`` of the same file. The legacy class builds only where
``can_use_custom_all_reduce_with_nvlink`` gives it a group (its
``_SUPPORTED_WORLD_SIZES`` on one host) and runs sgl_kernel's custom
all-reduce (``custom_ar_v1``: one or two stages, picked in C++) where its
``should_custom_ar`` admits the size.

All of it is read with the restricted evaluator, never run: the function on
the group's facts (``artune.formats.sglang.rules.fakes``), the legacy
``__init__`` up to its first call outside the file (where it allocates its
IPC buffers), and its ``should_custom_ar`` where ``ArchReading`` asks it.
What the evaluator cannot follow is reported to the reading's hook
(``Interpreter.unmodelled``) and the reading goes on.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from artune.errors import Raised, Unsupported
from artune.formats.files import SourceFile
from artune.formats.pyeval import Function, Namespace, Symbol, Unmodelled
from artune.formats.sglang.hip import AITER
from artune.formats.sglang.rules import lifted

V2 = "CustomAllReduceV2"
LEGACY = "CustomAllreduce"
DISPATCH = "dispatch_custom_allreduce"
LEGACY_KERNEL = "custom_ar_v1"  # artune's name for what the legacy class runs (artune.catalog)
MODULE = "sglang.srt.distributed.device_communicators.custom_all_reduce"
#: what GroupCoordinator hands the dispatch and the constructors: its CPU group, and a CUDA device
GROUP = Symbol("group")


def device() -> Namespace:
    """A CUDA device, as ``torch.device``: a fresh one per call, since the code may set attributes on it."""
    return Namespace("torch.device", {"type": "cuda", "index": 0})


Report = Callable[[str, str, str, str], None]  # (function, "FILE:LINE", what was met, what artune assumed)


@dataclass(frozen=True)
class Chosen:
    """The class ``dispatch_custom_allreduce`` returned (``V2``, ``LEGACY``, or "" for none), and where."""

    cls: str
    line: int | None


class Choice:
    """``custom_all_reduce.py`` of one release on one GPU: the dispatch's answer, the legacy class.

    ``fakes`` are the reading's stand-ins (the group's facts, shared with
    the v2 reading, so the dispatch sees the group the reading is at);
    ``unmodelled`` the reading's hook; ``report`` what the reading records
    where the file is not what this module expects of it; ``hip``: the
    machine is ROCm (``artune.formats.sglang.hip``).
    """

    def __init__(
        self,
        source: SourceFile,
        fakes: dict[str, Any],
        unmodelled: Callable[[Unmodelled], None],
        report: Report,
        hip: bool = False,
    ) -> None:
        self.source = source
        self.report = report
        # on HIP the dispatch imports AITER in a try/except ImportError: read as Python runs it (objects)
        self.interp = lifted(source, fakes, unmodelled, MODULE, objects=hip)
        found = self.interp.globals.values.get(DISPATCH)
        self.dispatch = found if isinstance(found, Function) else None
        defined = {s.name for s in self.interp.tree.body if isinstance(s, ast.ClassDef)}
        self.legacy = self.interp.class_methods(LEGACY) if LEGACY in defined else {}

    def where(self, node: ast.AST | None) -> str:
        return f"{self.source.path}:{getattr(node, 'lineno', 1)}"

    def chosen(self) -> Chosen:
        """The class ``dispatch_custom_allreduce`` returns for the group the fakes describe."""
        if self.dispatch is None:
            self.report(
                DISPATCH,
                self.where(None),
                f"{self.source.path} has no {DISPATCH}()",
                f"SGLang builds {V2} for every group",
            )
            return Chosen(V2, None)
        node = self.dispatch.node
        args = {"group": GROUP, "device": device()}
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        try:
            result = self.interp.call(self.dispatch, [], {p: args[p] for p in params if p in args})
        except Raised as err:  # GroupCoordinator catches it: no custom all-reduce, nccl; said, never silent
            self.report(
                DISPATCH,
                err.where or self.where(node),
                f"raises {err.kind} ({err.what}): SGLang's GroupCoordinator catches it and builds no custom all-reduce",
                "no custom all-reduce (nccl), as SGLang runs",
            )
            return Chosen("", node.lineno)
        except Unsupported as err:
            self.report(DISPATCH, self.where(node), f"the call ended with: {err}", "no custom all-reduce (nccl)")
            return Chosen("", node.lineno)
        name = str(result) if isinstance(result, Symbol) else getattr(result, "name", None)  # a ClassValue on HIP
        if result is None:
            return Chosen("", node.lineno)
        if name in (V2, LEGACY, AITER):
            return Chosen(name, node.lineno)
        self.report(
            DISPATCH,
            self.where(node),
            f"returned {result!r}, a communicator artune does not read (it reads {V2}, {LEGACY} and {AITER})",
            "no custom all-reduce runs (nccl)",
        )
        return Chosen("", node.lineno)

    def v2_condition(self) -> tuple[int, str] | None:
        """The line and text of the test under which ``dispatch_custom_allreduce`` can return v2 (its opt-in)."""
        if self.dispatch is None:
            return None
        for node in ast.walk(self.dispatch.node):
            if isinstance(node, ast.If) and any(
                isinstance(s, ast.Return) and s.value is not None and ast.unparse(s.value) == V2 for s in ast.walk(node)
            ):
                return node.lineno, ast.unparse(node.test)
        return None


__all__ = ["DISPATCH", "GROUP", "LEGACY", "LEGACY_KERNEL", "V2", "Choice", "Chosen", "device"]
