"""Byte sizes: the one place where sizes are parsed and printed.

Sizes are integers of bytes, or strings with binary units (``"64KiB"``,
``"2.5MiB"``, ``"1GiB"``, ``"512B"``). A fractional number of bytes is
truncated, as SGLang does with ``int(2.438 * MB)``.
"""

from __future__ import annotations

import re
from decimal import ROUND_FLOOR, Decimal, InvalidOperation

from artune.errors import SizeError

UNITS: dict[str, int] = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
MAX_SIZE = 1 << 50  # 1 PiB: anything larger is a typo, not a message size
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
_DECIMAL_UNITS = {"KB", "MB", "GB", "TB", "K", "M", "G", "T", "KIB", "MIB", "GIB", "TIB", "kB", "kb", "mb"}


def parse_size(value: object, what: str = "size") -> int:
    """Return ``value`` as a number of bytes, or raise ``SizeError`` naming ``what``.

    Accepts non-negative integers and strings such as ``"4096"``, ``"64KiB"``,
    ``"2.438MiB"`` (truncated to whole bytes).
    """
    if isinstance(value, bool):
        raise SizeError(f"{what}: expected a byte size, got the boolean {value!r}")
    if isinstance(value, int):
        nbytes = value
    elif isinstance(value, str):
        nbytes = _parse_text(value, what)
    else:
        raise SizeError(f"{what}: expected an integer or a string like '64KiB', got {type(value).__name__} {value!r}")
    if nbytes < 0:
        raise SizeError(f"{what}: size must not be negative, got {value!r}")
    if nbytes > MAX_SIZE:
        raise SizeError(f"{what}: size {value!r} is larger than 1 PiB; check the unit")
    return nbytes


def _parse_text(text: str, what: str) -> int:
    match = _SIZE_RE.match(text)
    if not match:
        raise SizeError(f"{what}: cannot read {text!r} as a size; write e.g. 4096, '64KiB' or '2.5MiB'")
    number, unit = match.groups()
    unit = unit or "B"
    if unit not in UNITS:
        hint = " (artune sizes are binary: write KiB/MiB/GiB)" if unit in _DECIMAL_UNITS else ""
        raise SizeError(f"{what}: unknown unit {unit!r} in {text!r}{hint}; units: {', '.join(UNITS)}")
    if unit == "B" and "." in number:
        raise SizeError(f"{what}: {text!r} is a fraction of a byte; give whole bytes or a unit like '1.5KiB'")
    try:
        exact = Decimal(number) * UNITS[unit]
    except InvalidOperation as err:  # pragma: no cover - the regex admits only decimals
        raise SizeError(f"{what}: cannot read {text!r} as a size") from err
    if exact > 2 * MAX_SIZE:  # parse_size enforces MAX_SIZE; this only bounds the arithmetic
        raise SizeError(f"{what}: size {text!r} is larger than 1 PiB; check the unit")
    return int(exact.to_integral_value(rounding=ROUND_FLOOR))


def format_size(nbytes: int) -> str:
    """Exact, human-friendly text for ``nbytes`` that ``parse_size`` reads back to the same integer.

    ``65536 -> "64KiB"``, ``2621440 -> "2.5MiB"``, ``2556428 -> "2556428"``.
    """
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        scale = UNITS[unit]
        if nbytes >= scale:
            text = f"{Decimal(nbytes) / scale:.3f}".rstrip("0").rstrip(".")
            if _parse_text(text + unit, "size") == nbytes:
                return text + unit
    return str(nbytes)


UNBOUNDED = "inf"  # how files and messages write "no upper bound" (never a huge size standing for it)


def parse_bound(value: object, what: str = "bound") -> int | None:
    """An inclusive upper bound: a size as ``parse_size`` reads it, or ``"inf"`` for none (``None``)."""
    if isinstance(value, str) and value.strip() == UNBOUNDED:
        return None
    return parse_size(value, what)


def format_bound(upto: int | None) -> str:
    """``format_size`` of a bound, ``"inf"`` for none."""
    return UNBOUNDED if upto is None else format_size(upto)


def human_size(nbytes: int) -> str:
    """Approximate text for display only (``"2.44MiB"``); not meant to be parsed back."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if nbytes >= UNITS[unit]:
            return f"{nbytes / UNITS[unit]:.3g}{unit}"
    return f"{nbytes}B"


def _nice(nbytes: int) -> bool:
    return nbytes == 0 or not format_size(nbytes).isdigit()


def format_span(lower: int, upper: int | None) -> str:
    """An inclusive byte range in interval notation with the tidiest bounds.

    ``(0, 1048575) -> "[0, 1MiB)"``, ``(2556429, 134217728) -> "(2.438MiB, 128MiB]"``,
    ``(134217729, None) -> "(128MiB, inf)"``.
    """
    if lower == 0 or not _nice(lower - 1):
        left = f"[{format_size(lower)}"
    else:
        left = f"({format_size(lower - 1)}"
    if upper is None:
        right = "inf)"
    elif _nice(upper) or not _nice(upper + 1):
        right = f"{format_size(upper)}]"
    else:
        right = f"{format_size(upper + 1)})"
    return f"{left}, {right}"
