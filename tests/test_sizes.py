"""Byte sizes: parsing, exact printing and the interval notation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from artune.errors import SizeError
from artune.sizes import MAX_SIZE, format_bound, format_size, format_span, parse_bound, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        (4096, 4096),
        ("64KiB", 65536),
        ("2.5MiB", 2621440),
        ("2.438MiB", int(2.438 * (1 << 20))),  # truncated like SGLang's int(2.438 * MB)
        ("1GiB", 1 << 30),
        (" 3 MiB ", 3 << 20),
        ("0", 0),
        ("512B", 512),
    ],
)
def test_parse(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["-1", -1, "1MB", "1.5", "x", "", "1 PiB", True, 1.5, None, "2e3KiB", "2048TiB"])
def test_parse_rejects_with_a_clear_error(bad: object) -> None:
    with pytest.raises(SizeError) as err:
        parse_size(bad, "upto")
    assert "upto" in str(err.value)


def test_decimal_units_get_a_hint() -> None:
    with pytest.raises(SizeError, match="binary"):
        parse_size("64KB")


@given(st.integers(min_value=0, max_value=MAX_SIZE))
def test_format_round_trips(nbytes: int) -> None:
    assert parse_size(format_size(nbytes)) == nbytes


def test_format_prefers_units() -> None:
    assert format_size(65536) == "64KiB"
    assert format_size(2621440) == "2.5MiB"
    assert format_size(1000) == "1000"


def test_span_notation() -> None:
    assert format_span(0, (1 << 20) - 1) == "[0, 1MiB)"
    assert format_span(2556429, 128 << 20) == "(2.438MiB, 128MiB]"
    assert format_span((128 << 20) + 1, None) == "(128MiB, inf)"
    assert format_span(1 << 20, 2 << 20) == "[1MiB, 2MiB]"


def test_bounds_write_no_bound_as_inf() -> None:
    assert parse_bound("inf") is None and format_bound(None) == "inf"
    assert parse_bound("1MiB") == 1 << 20 and format_bound(1 << 20) == "1MiB"
    with pytest.raises(SizeError, match="cannot read 'infinity'"):
        parse_bound("infinity")
