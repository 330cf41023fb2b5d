"""The caller's workspace rule: where ``AllreduceOp`` sends a message to NCCL before it asks the lookup table.

``cpp/tensorrt_llm/thop/allreduceOp.cpp`` computes the message's bytes
(tokens x hidden x the dtype's size) and
``getMaxRequiredWorkspaceSize(mGroup.size())``, and ``ifFallbackToNCCL``
returns true when the bytes are over it (and when the ranks lack P2P or
NVLink): the custom kernels never see such a message. artune's shape tables
hold that rule as ``Table.caps``; this module reads it from the revision's
own caller when the checkout has the file, so that a caller that stopped
comparing bytes with the workspace is said, not assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from artune.formats.files import SourceFile
from artune.formats.trtllm import syntax
from artune.formats.trtllm.cxx import CxxText, line_at, strip_comments
from artune.table.types import Caveat, CaveatKind

FILE = "cpp/tensorrt_llm/thop/allreduceOp.cpp"
FUNCTION = "AllreduceOp::ifFallbackToNCCL"
ASSUMED = "a message whose bytes are over getMaxRequiredWorkspaceSize(TP) runs NCCL (AllreduceOp's rule)"

_DEFINITION = re.compile(r"\bbool\s+ifFallbackToNCCL\s*\(([^)]*)\)\s*(?:const\s*)?(?:noexcept\s*)?\{")
_WORKSPACE_CALL = re.compile(r"(\w+)\s*=\s*[\w:]*getMaxRequiredWorkspaceSize\(\s*mGroup\.size\(\)\s*\)")
_BYTES = re.compile(r"(\w+)\s*=\s*\w+\s*\*\s*[\w:]*getDTypeSize\(\s*mType\s*\)")


@dataclass(frozen=True)
class CallerRule:
    """Where the caller compares a message's bytes with the workspace, and what else sends it to NCCL."""

    where: str  # FILE:LINE of ifFallbackToNCCL's test
    workspace: str  # FILE:LINE where getMaxRequiredWorkspaceSize(mGroup.size()) is called
    also: str  # the test's other conditions, as written ("" when none)

    def note(self) -> str:
        """One sentence for a table's provenance."""
        also = f" (also when {self.also}: on ranks with P2P and NVLink the table decides)" if self.also else ""
        return f"the caller sends a message over the workspace to NCCL: {self.where}{also}; workspace {self.workspace}"


def read_caller(file: SourceFile) -> tuple[CallerRule | None, list[Caveat]]:
    """The workspace rule of ``allreduceOp.cpp``, or a caveat saying what was not found where."""
    src = CxxText(file.label, strip_comments(file.text))
    found = _DEFINITION.search(src.text)
    if found is None:
        return None, [_caveat(f"{file.label}:1", "ifFallbackToNCCL(...) is not in the file")]
    params = [p.split()[-1] for p in found.group(1).split(",") if p.split()]
    line = line_at(src.text, found.start())
    if len(params) < 3:
        return None, [
            _caveat(f"{file.label}:{line}", f"ifFallbackToNCCL({found.group(1).strip()}): unknown parameters")
        ]
    nbytes, cap = params[1], params[2]
    begin, end = src.block(found.end() - 1)
    test = next((s for s in _statements(syntax.parse_body(src.text, begin, end)) if _compares(s, nbytes, cap)), None)
    call = _WORKSPACE_CALL.search(src.text)
    size = _BYTES.search(src.text)
    if test is None or call is None or size is None:
        missing = (
            f"no 'if ({nbytes} > {cap} ...) return true;' in ifFallbackToNCCL"
            if test is None
            else "getMaxRequiredWorkspaceSize(mGroup.size()), or the bytes of mType, not computed as artune reads them"
        )
        return None, [_caveat(f"{file.label}:{line}", missing)]
    others = [o for o in _operands(test.test) if not _is_compare(o, nbytes, cap)]
    also = " or ".join(_text(o) for o in others)
    where = f"{file.label}:{line_at(src.text, call.start())}"
    return CallerRule(f"{file.label}:{test.line}", where, also), []


def _caveat(where: str, detail: str) -> Caveat:
    return Caveat(CaveatKind.UNEVALUATED, FUNCTION, where, detail, ASSUMED)


def _statements(body: tuple[syntax.Stmt, ...]) -> list[syntax.If]:
    out: list[syntax.If] = []
    for stmt in body:
        if isinstance(stmt, syntax.If):
            out += [stmt, *_statements(stmt.then)]
    return out


def _compares(stmt: syntax.If, nbytes: str, cap: str) -> bool:
    """``if (<nbytes> > <cap> [|| ...]) { ... return true; }``."""
    returns = [s for s in stmt.then if isinstance(s, syntax.Return)]
    true = bool(returns) and returns[-1].value == syntax.Name(("true",))
    return true and any(_is_compare(o, nbytes, cap) for o in _operands(stmt.test))


def _operands(test: syntax.Expr) -> list[syntax.Expr]:
    if isinstance(test, syntax.Binary) and test.op == "||":
        return [*_operands(test.left), *_operands(test.right)]
    return [test]


def _is_compare(node: syntax.Expr, nbytes: str, cap: str) -> bool:
    return (
        isinstance(node, syntax.Binary)
        and node.op == ">"
        and node.left == syntax.Name((nbytes,))
        and node.right == syntax.Name((cap,))
    )


def _text(node: syntax.Expr) -> str:
    if isinstance(node, syntax.Unary) and isinstance(node.operand, syntax.Name):
        return f"{node.op}{node.operand.last}"
    if isinstance(node, syntax.Name):
        return node.last
    return "another condition"


__all__ = ["FILE", "CallerRule", "read_caller"]
