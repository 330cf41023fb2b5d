"""Property tests of the table reader: bad input only ever raises a one-line TableError naming the file.

Valid random tables survive a write and a read unchanged. Inputs are kept
small so the whole module runs in a few seconds.
"""

from __future__ import annotations

import copy
import datetime
import math
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artune.errors import TableError
from artune.sizes import MAX_SIZE
from artune.table.io import (
    MAX_BANDS,
    MAX_FILE_BYTES,
    MAX_PLANS,
    MAX_WORLD_SIZE,
    digest,
    dumps_table,
    load_table,
    loads_table,
    table_from_dict,
    table_to_dict,
)
from artune.table.types import KINDS, MODES, SOURCES, Band, Plan, Platform, Provenance, Table, freeze_params

ORIGIN = "fuzz/table.toml"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def one_line(text: str) -> bool:
    return len(text.splitlines()) <= 1 and not text.endswith(("\n", "\r"))


def check_error(err: TableError, origin: str = ORIGIN) -> None:
    message = str(err)
    assert message.startswith(f"{origin}:"), message
    assert one_line(message), message


def read_text(text: str, origin: str = ORIGIN) -> Table | None:
    """``loads_table``; a TableError must be clean, and any other exception fails the test."""
    try:
        return loads_table(text, origin=origin)
    except TableError as err:
        check_error(err, origin)
        return None


def read_dict(data: dict[str, Any]) -> Table | None:
    """``table_from_dict`` and, when the dict is TOML, ``loads_table`` of it: same outcome."""
    try:
        table = table_from_dict(data, ORIGIN)
    except TableError as err:
        check_error(err)
        table = None
    try:
        text = tomli_w.dumps(data)
    except (TypeError, ValueError):
        return table  # not representable as TOML (None, ...): the dict path alone
    from_text = read_text(text)
    assert (from_text is None) == (table is None)
    return table


# ---------------------------------------------------------------- strategies

# Keys of a valid table are non-empty printable strings (the reader rejects others, see
# test_param_key_with_newline_*); values may hold anything.
_NO_BREAKS = st.characters(blacklist_categories=("Cs",)).filter(lambda c: one_line(f"a{c}b"))
KEY = st.text(_NO_BREAKS, min_size=1, max_size=10).filter(str.isprintable)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
NAME = st.text(_NO_BREAKS, min_size=1, max_size=10).filter(str.isprintable)
PARAM_VALUE = st.one_of(INT64, st.floats(allow_nan=False, allow_infinity=False), TEXT, st.booleans())
TOML_SCALAR = st.one_of(
    st.integers(),
    st.floats(),
    TEXT,
    st.booleans(),
    st.dates(),
    st.times(),
    st.datetimes(),
)
ANY_VALUE = st.recursive(
    TOML_SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    """Valid tables: unique (world_size, mode), increasing bands (the last maybe open-ended), sizes below 1 PiB.

    1 PiB, which old files wrote for "no bound", is left to
    ``test_an_open_ended_band_is_written_inf_and_old_sentinels_still_read``.
    """
    platform = Platform(draw(st.sampled_from(KINDS)), draw(st.text(min_size=1, max_size=8)), draw(TEXT))

    def provenance() -> Provenance:
        return Provenance(draw(st.sampled_from(SOURCES)), *(draw(TEXT) for _ in range(5)))

    keys = draw(st.lists(st.tuples(st.integers(1, MAX_WORLD_SIZE), st.sampled_from(MODES)), max_size=4, unique=True))
    plans = []
    for world_size, mode in keys:
        uptos = sorted(draw(st.sets(st.integers(0, MAX_SIZE - 1), max_size=4)))
        if draw(st.booleans()):
            uptos.append(None)  # an open-ended last band
        bands = tuple(Band(u, tuple(draw(st.lists(NAME, min_size=1, max_size=3)))) for u in uptos)
        params = draw(st.dictionaries(NAME, st.dictionaries(KEY, PARAM_VALUE, max_size=3), max_size=2))
        plan_provenance = provenance() if draw(st.booleans()) else None
        plans.append(Plan(world_size, mode, bands, draw(NAME), freeze_params(params), plan_provenance))
    return Table(platform, provenance(), tuple(plans))


def sample_dict() -> dict[str, Any]:
    """A valid table as a dict, using every key the reader knows."""
    prov = {k: "x" for k in ("date", "device", "tool", "notes", "inherited_from")}
    return {
        "schema": 1,
        "platform": {"kind": "cuda", "arch": "10.7", "device": "GPU"},
        "provenance": {"source": "measured", **prov},
        "plan": [
            {
                "world_size": 2,
                "mode": "graph",
                "fallback": "nccl",
                "bands": [{"upto": "64KiB", "algorithm": "a"}, {"below": 1 << 20, "algorithm": ["a", "b"]}],
                "params": {"a": {"blocks": 4, "f": 1.5, "s": "x", "b": True}},
                "provenance": {"source": "published", **prov},
            }
        ],
    }


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key or index path inside ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield (*prefix, key)
        yield from paths(item, (*prefix, key))


def replaced(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


# ---------------------------------------------------------------- malformed input


@FAST
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    read_text(text)


_TOKENS = [
    "schema = 1\n", "[platform]\n", 'kind = "cuda"\n', 'arch = "9.0"\n', "[provenance]\n",
    'source = "measured"\n', "[[plan]]\n", "world_size = ", "2", "-1", "0", "1e3", "nan", "inf",
    "99999999999999999999", 'fallback = "nccl"\n', 'mode = "eager"\n', "[[plan.bands]]\n", "upto = ",
    "below = ", '"64KiB"', '"2.5MiB"', '"1e9"', '"-1"', '"4096TiB"', 'algorithm = "x"\n',
    'algorithm = []\n', "[plan.params.x]\n", "k = ", "[1, 2]", "{a = 1}", "1979-05-27", "true",
    "\n", "=", "[", "]", "{", "}", ",", '"', "'", ".", "x_extra = 1\n", "bogus = 1\n",
]  # fmt: skip


@FAST
@given(st.lists(st.sampled_from(_TOKENS), max_size=40))
def test_toml_like_text(tokens: list[str]) -> None:
    read_text("".join(tokens))


@FAST
@given(st.binary(max_size=300))
def test_random_bytes_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.toml")
        with open(path, "wb") as handle:
            handle.write(data)
        try:
            load_table(path)
        except TableError as err:
            check_error(err, path)
    read_text(data.decode("latin-1"))


@pytest.mark.parametrize("path", list(paths(sample_dict())), ids=str)
@pytest.mark.parametrize(
    "value",
    [None, 0, -1, 2**80, 1.5, math.nan, math.inf, True, "", "x", "-1", [], [1], {}, {"x": 1},
     datetime.date(2024, 1, 1), datetime.time(1, 2)],
    ids=repr,
)  # fmt: skip
def test_wrong_type_for_every_key(path: tuple[Any, ...], value: Any) -> None:
    read_dict(replaced(sample_dict(), path, value))


@FAST
@given(st.data())
def test_random_value_anywhere(data: st.DataObject) -> None:
    base = sample_dict()
    path = data.draw(st.sampled_from(list(paths(base))))
    read_dict(replaced(base, path, data.draw(ANY_VALUE)))


@FAST
@given(st.data())
def test_deleted_key_anywhere(data: st.DataObject) -> None:
    base = sample_dict()
    path = data.draw(st.sampled_from([p for p in paths(base) if isinstance(p[-1], str)]))
    broken = copy.deepcopy(base)
    node: Any = broken
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    read_dict(broken)


_SECTIONS: list[tuple[Any, ...]] = [(), ("platform",), ("provenance",), ("plan", 0), ("plan", 0, "bands", 0)]


@FAST
@given(st.sampled_from(_SECTIONS), KEY, ANY_VALUE)
def test_unknown_keys(section: tuple[Any, ...], key: str, value: Any) -> None:
    data = sample_dict()
    node: Any = data
    for part in section:
        node = node[part]
    if key in node:
        return
    node[key] = value
    table = read_dict(data)
    if key.startswith(("x_", "x-")):
        assert table is not None  # extensions of other tools are ignored
    else:
        assert table is None


@FAST
@given(
    st.sampled_from(["upto", "below"]),
    st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=MAX_SIZE + 1),
        st.integers(0, MAX_SIZE + 1),
        st.floats(),
        st.booleans(),
        st.text(max_size=12),
        st.from_regex(r"\A[0-9]{1,20}(\.[0-9]{0,4})?\s?(B|KiB|MiB|GiB|TiB|KB|MB|k)?\Z"),
    ),
)
def test_band_sizes(key: str, size: Any) -> None:
    data = sample_dict()
    data["plan"][0]["bands"] = [{key: size, "algorithm": "a"}]
    table = read_dict(data)
    if table is not None:
        upto = table.plans[0].bands[0].upto
        # the largest size is what old files wrote for "no bound": read as open-ended
        assert (upto is None) == (size in (MAX_SIZE, "1024TiB") and key == "upto")
        assert upto is None or 0 <= upto < MAX_SIZE
    if isinstance(size, int) and not isinstance(size, bool):
        in_range = 0 <= size <= MAX_SIZE and (key == "upto" or size > 0)
        assert (table is not None) == in_range


@FAST
@given(st.integers())
def test_world_sizes(world_size: int) -> None:
    data = sample_dict()
    data["plan"][0]["world_size"] = world_size
    assert (read_dict(data) is not None) == (1 <= world_size <= MAX_WORLD_SIZE)


# ---------------------------------------------------------------- limits


def test_text_over_the_size_limit() -> None:
    assert read_text("#" * (MAX_FILE_BYTES + 1)) is None


def test_file_over_the_size_limit(tmp_path: Any) -> None:
    path = tmp_path / "big.toml"
    with open(path, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: cheap to make
    with pytest.raises(TableError) as err:
        load_table(path)
    check_error(err.value, str(path))


def test_missing_file(tmp_path: Any) -> None:
    path = tmp_path / "none.toml"
    with pytest.raises(TableError) as err:
        load_table(path)
    check_error(err.value, str(path))


def test_too_many_plans_and_bands() -> None:
    data = sample_dict()
    plan = data["plan"][0]
    data["plan"] = [dict(plan, world_size=i + 1) for i in range(MAX_PLANS + 1)]
    assert read_dict(data) is None
    data = sample_dict()
    data["plan"][0]["bands"] = [{"upto": i, "algorithm": "a"} for i in range(MAX_BANDS + 1)]
    assert read_dict(data) is None


def test_deep_nesting() -> None:
    depth = 100_000
    assert read_text("a = " + "[" * depth + "]" * depth) is None
    assert read_text("a = " + "{b = " * depth + "1" + "}" * depth) is None


# ---------------------------------------------------------------- round trip


@FAST
@given(tables())
def test_valid_tables_round_trip(table: Table) -> None:
    assert loads_table(dumps_table(table), origin=ORIGIN) == table
    assert table_from_dict(table_to_dict(table, exact=True), ORIGIN) == table


# ---------------------------------------------------------------- known reader bugs (report, not fixed here)


def test_param_key_with_newline_gives_a_one_line_message() -> None:
    text = '[platform]\nkind = "cuda"\narch = "9.0"\n[provenance]\nsource = "measured"\n'
    text += '[[plan]]\nworld_size = 2\nfallback = "nccl"\n[plan.params]\n"a\\nb" = 3\n'
    assert read_text(text) is None


def test_table_from_dict_with_a_non_string_key() -> None:
    with pytest.raises(TableError):
        table_from_dict({1: 2}, ORIGIN)  # type: ignore[dict-item]


def test_an_open_ended_band_is_written_inf_and_old_sentinels_still_read() -> None:
    head = '[platform]\nkind = "cuda"\narch = "9.0"\n[provenance]\nsource = "measured"\n'
    head += '[[plan]]\nworld_size = 2\nfallback = "nccl"\n'
    old = loads_table(head + '[[plan.bands]]\nupto = "1024TiB"\nalgorithm = "a"\n', origin=ORIGIN)
    new = loads_table(head + '[[plan.bands]]\nupto = "inf"\nalgorithm = "a"\n', origin=ORIGIN)
    assert old == new and digest(old) == digest(new)
    assert new.plans[0].bands == (Band(None, ("a",)),) and new.plans[0].open_ended
    text = dumps_table(old)
    assert 'upto = "inf"' in text and "TiB" not in text
    assert loads_table(text, origin=ORIGIN) == old
    # a sentinel written as an integer reads the same; in code too
    assert Plan(2, "eager", (Band(MAX_SIZE, ("a",)),), "nccl").bands == (Band(None, ("a",)),)


def test_only_the_last_band_may_be_open_ended() -> None:
    head = '[platform]\nkind = "cuda"\narch = "9.0"\n[provenance]\nsource = "measured"\n'
    head += '[[plan]]\nworld_size = 2\nfallback = "nccl"\n'
    text = head + '[[plan.bands]]\nupto = "inf"\nalgorithm = "a"\n[[plan.bands]]\nupto = "1MiB"\nalgorithm = "b"\n'
    with pytest.raises(TableError, match="band 1: upto = 'inf' leaves no size for the bands after it"):
        loads_table(text, origin=ORIGIN)
    with pytest.raises(TableError, match="only the last band may be open-ended"):
        Plan(2, "eager", (Band(None, ("a",)), Band(5, ("b",))), "nccl")
    with pytest.raises(TableError, match="below"):
        loads_table(head + '[[plan.bands]]\nbelow = "inf"\nalgorithm = "a"\n', origin=ORIGIN)


@given(tables())
def test_no_written_table_holds_a_sentinel(table: Table) -> None:
    assert "1024TiB" not in dumps_table(table)
