"""The reviewers' findings on vLLM's ROCm dispatch: QuickReduce's table as the release's code runs it.

``QuickAllReduce._QR_MIN_SIZE`` (``quick_all_reduce.py``) holds, per
``(dtype, world size)``, one minimum size per quantization level (FP, INT8,
INT6, INT4, INT3); QuickReduce runs a message from that minimum up to its
maximum (``ops.qr_max_size()``, 2 GiB, or ``VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB``).
The table is read as the module's top level left it (evaluated, never
imported), and each finding names the row's file and line:

- V110: the release raises at start-up on ROCm under the settings read (an
  unknown level its ``envs.py`` refuses);
- V111: a level whose minimum is QuickReduce's whole buffer or more: it never
  runs at that world size and dtype;
- V112: a world size QuickReduce supports (``_SUPPORTED_WORLD_SIZES``, per
  supported dtype) with no row: ``should_quick_allreduce`` raises ``KeyError``
  on the first message;
- V113: a row equal to another dtype's at the same world size: copied, or
  measured?
- V114: the environment's maximum (``VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB``)
  at or below a level's minimum: the cap clips that level away.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from artune import rocm
from artune.formats.files import SourceFile
from artune.formats.pyeval import Namespace
from artune.formats.pyeval.values import ClassValue
from artune.formats.vllm.code import COMM, PACKAGE
from artune.formats.vllm.dispatch import Evaluation
from artune.formats.vllm.world import QR_MAX_SIZE
from artune.sizes import format_size
from artune.table.check import Finding

QR_FILE = COMM + "quick_all_reduce.py"
LEVELS = ("FP", "INT8", "INT6", "INT4", "INT3")  # the order of each _QR_MIN_SIZE row
MiB = 1 << 20
QR_ARCHS = "gfx94*, gfx95*"  # the archs QuickReduce's own check admits (_rocm_arch_available)


def rocm_findings(
    evaluation: Evaluation, files: list[SourceFile], settings: Mapping[str, str] | None
) -> tuple[Finding, ...]:
    """Every ROCm finding of one reading (each AMD arch artune has facts for is read)."""
    table = f"vllm:{files[0].label}"
    out = list(_raises(evaluation, table))
    source = next((f for f in files if f.path.endswith(QR_FILE)), None)
    quick = evaluation.release.globals(PACKAGE + ".quick_all_reduce").get("QuickAllReduce")
    if source is None or not isinstance(quick, ClassValue):
        return tuple(out)
    rows = quick.attributes.get("_QR_MIN_SIZE")
    if not isinstance(rows, dict):
        return tuple(out)
    lines = _row_lines(source)
    name = source.path
    table_rows = {key: row for key, row in rows.items() if _key(key) is not None}
    status, cast = evaluation.release.env("VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16")
    out += _never(table_rows, lines, name, table, status == "value" and bool(cast))
    out += _missing(quick, table_rows, lines, name, table)
    out += _copied(table_rows, lines, name, table)
    cap = (settings or {}).get("VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB")
    if cap is not None and cap.strip().lstrip("-").isdigit():
        out += _clipped(table_rows, int(cap) * MiB, lines, name, table)
    return tuple(out)


def _raises(evaluation: Evaluation, table: str) -> list[Finding]:
    """V110: where building the communicator raises on one host of an AMD arch (the message's file and line)."""
    out = []
    name = evaluation.release.stage.settings
    under = ", ".join(f"{k}={v}" for k, v in sorted(name.items())) or "no VLLM_* variable set"
    for gfx in rocm.archs():
        reading = evaluation.arch(gfx)
        sizes = sorted(ws for ws, hosts, rack in reading.at_start if hosts == 1 and not rack)
        if not sizes:
            continue
        raised = reading.raises[(sizes[0], 1, False)]
        out.append(
            Finding(
                table,
                gfx,
                f"vLLM raises at start-up on ROCm at world sizes {', '.join(map(str, sizes))}: under {under}, "
                f"{raised.raises}",
                sizes[0] if len(sizes) == 1 else None,
                source=raised.where,
                severity="error",
                code="V110",
                world_sizes=tuple(sizes),
                args=(under, raised.raises),
            )
        )
    return out


def _key(key: Any) -> tuple[str, int] | None:
    """``(dtype name, world size)`` of a ``_QR_MIN_SIZE`` key (``(torch.float16, 2)``)."""
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], int):
        dtype = key[0]
        name = dtype.values.get("name") if isinstance(dtype, Namespace) else str(dtype).rpartition(".")[2]
        return (str(name), key[1]) if name else None
    return None


def _row_lines(source: SourceFile) -> dict[tuple[str, int], int]:
    """The line of each ``_QR_MIN_SIZE`` row, by ``(dtype name, world size)`` as the file writes the key."""
    out: dict[tuple[str, int], int] = {}
    for node in ast.walk(ast.parse(source.text)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_QR_MIN_SIZE" for t in node.targets):
            if isinstance(node.value, ast.Dict):
                for key in node.value.keys:
                    if isinstance(key, ast.Tuple) and len(key.elts) == 2:
                        dtype, ws = key.elts
                        if isinstance(ws, ast.Constant) and isinstance(ws.value, int):
                            out[(ast.unparse(dtype).rpartition(".")[2], ws.value)] = key.lineno
            out.setdefault(("", 0), node.lineno)
    return out


def _where(name: str, lines: dict[tuple[str, int], int], row: tuple[str, int] | None) -> str:
    line = lines.get(row) if row is not None else None
    return f"{name}:{line or lines.get(('', 0), 1)}"


def _row(
    table: str,
    row: tuple[str, int],
    message: str,
    code: str,
    name: str,
    lines: dict[Any, int],
    world_sizes: tuple[int, ...] = (),
    args: tuple[str | int, ...] = (),
) -> Finding:
    """A warning about one ``_QR_MIN_SIZE`` row, at its line (``world_sizes``: those its message names; ``args``:
    what it is written from besides the row's dtype)."""
    where = _where(name, lines, row)
    found = (row[0], *args)
    return Finding(table, QR_ARCHS, message, row[1], source=where, code=code, world_sizes=world_sizes, args=found)


def _never(rows: dict[Any, Any], lines: dict[tuple[str, int], int], name: str, table: str, cast: bool) -> list[Finding]:
    """V111: levels whose minimum is QuickReduce's whole buffer or more (``cast``: bf16 messages read the
    float16 rows, VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16 on)."""
    cast_note = (
        "with VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16 on, as here, a bfloat16 message reads the float16 row "
        "instead, and this row is read only with it off"
        if cast
        else ""
    )
    out = []
    for key, row in rows.items():
        dtype, ws = _key(key)  # type: ignore[misc]
        never = [LEVELS[i] for i, size in enumerate(row) if i < len(LEVELS) and size >= QR_MAX_SIZE]
        if never:
            message = (
                f"_QR_MIN_SIZE row ({dtype}, {ws}): QuickReduce at {', '.join(never)} never runs at world size "
                f"{ws} for {dtype}: its minimum is QuickReduce's whole buffer "
                f"(the {format_size(QR_MAX_SIZE)} that ops.qr_max_size() returns) or more, so the level is on "
                "and takes no message below it" + (f" ({cast_note})" if dtype == "bfloat16" and cast_note else "")
            )
            out.append(_row(table, (dtype, ws), message, "V111", name, lines, (ws,)))
    return out


def _missing(
    quick: ClassValue, rows: dict[Any, Any], lines: dict[tuple[str, int], int], name: str, table: str
) -> list[Finding]:
    """V112: a supported world size and dtype with no row."""
    sizes = quick.attributes.get("_SUPPORTED_WORLD_SIZES") or ()
    dtypes = [d.values.get("name") for d in quick.attributes.get("_SUPPORTED_DTYPES") or () if isinstance(d, Namespace)]
    have = {_key(k) for k in rows}
    out = []
    for dtype in dtypes:
        lacking = [ws for ws in sizes if (dtype, ws) not in have]
        if lacking:
            out.append(
                Finding(
                    table,
                    QR_ARCHS,
                    f"_QR_MIN_SIZE has no row for {dtype} at world size{'s' if len(lacking) > 1 else ''} "
                    f"{', '.join(map(str, lacking))}, which _SUPPORTED_WORLD_SIZES admits: should_quick_allreduce "
                    "raises KeyError on the first message QuickReduce is asked to take there",
                    lacking[0] if len(lacking) == 1 else None,
                    source=_where(name, lines, None),
                    severity="error",
                    code="V112",
                    world_sizes=tuple(lacking),
                    args=(dtype,),
                )
            )
    return out


def _copied(rows: dict[Any, Any], lines: dict[tuple[str, int], int], name: str, table: str) -> list[Finding]:
    """V113: a row equal to another dtype's at the same world size."""
    by_ws: dict[int, list[tuple[str, list[int]]]] = {}
    for key, row in rows.items():
        dtype, ws = _key(key)  # type: ignore[misc]
        by_ws.setdefault(ws, []).append((dtype, list(row)))
    out = []
    for ws, found in sorted(by_ws.items()):
        for index, (dtype, row) in enumerate(found):
            same = [other for other, theirs in found[:index] if theirs == row]
            if same:
                message = (
                    f"_QR_MIN_SIZE row ({dtype}, {ws}) equals the {same[0]} row at world size {ws}: the kernels "
                    "differ by dtype (bf16 is slower), so measured, or copied?"
                )
                out.append(_row(table, (dtype, ws), message, "V113", name, lines, (ws,), (same[0],)))
    return out


def _clipped(rows: dict[Any, Any], cap: int, lines: dict[tuple[str, int], int], name: str, table: str) -> list[Finding]:
    """V114: levels whose minimum is above the environment's maximum."""
    out = []
    for key, row in rows.items():
        dtype, ws = _key(key)  # type: ignore[misc]
        clipped = [
            LEVELS[i] for i, size in enumerate(row) if i < len(LEVELS) and cap < size < QR_MAX_SIZE
        ]  # at or above the buffer, V111 says it
        if clipped:
            message = (
                f"VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB caps QuickReduce at {format_size(cap)}, below the "
                f"minimum of the _QR_MIN_SIZE row ({dtype}, {ws}) at {', '.join(clipped)}: the cap clips "
                "those levels away at that world size (no message is both above the minimum and below the cap)"
            )
            out.append(_row(table, (dtype, ws), message, "V114", name, lines, (), (cap,)))
    return out


__all__ = ["rocm_findings"]
