"""Shape plans: a type of their own (``ShapePlan``), for engines that decide by tokens x hidden x fused op.

A shape plan covers a range of world sizes and a range of hidden sizes for
some fused ops; its bands count tokens. A table holds them beside its plans
by bytes (``Table.shape_plans``), ``decide`` reads the one whose ranges hold
the call, and the TOML keeps them as ``[[shape_plan]]``, reading the form
tables were written in before (``[[plan]]`` with ``hidden`` and ``fusions``).
"""

from __future__ import annotations

import pytest

from artune.errors import TableError
from artune.table.check import check_table
from artune.table.decide import decide
from artune.table.diff import diff_tables
from artune.table.io import dumps_table, loads_table, table_to_dict
from artune.table.types import Band, Plan, Platform, Provenance, ShapePlan, Table, TokenShape, pow2_ranges

ONE, TWO = "trtllm_oneshot", "trtllm_twoshot"


def shape(
    ws: tuple[int, int | None], hidden: tuple[int, int | None], bands: tuple[Band, ...], *fusions: str
) -> ShapePlan:
    return ShapePlan(*ws, *hidden, fusions or ("NONE",), bands, "nccl")


def table(*plans: ShapePlan, caps: tuple[tuple[int | None, int], ...] = ()) -> Table:
    return Table(Platform("cuda", "9.0"), Provenance("published"), (), rules="trtllm", caps=caps, shape_plans=plans)


ROW = (Band(63, (ONE,)), Band(1023, (TWO,)), Band(None, ("nccl",)))


def test_a_shape_plan_checks_its_ranges_and_fused_ops() -> None:
    with pytest.raises(TableError, match=r"world size range 4\.\.3"):
        shape((4, 3), (1, None), ROW)
    with pytest.raises(TableError, match="at least one fused op"):
        ShapePlan(1, None, 1, None, (), ROW, "nccl")
    with pytest.raises(TableError, match="only the last band"):
        shape((1, None), (1, None), (Band(None, (ONE,)), Band(5, (TWO,))))
    plan = shape((4, 7), (4096, 8191), ROW, "NONE", "RESIDUAL_RMS_NORM")
    assert plan.label == "ws=4..7 hidden=4096..8191 fusion=NONE/RESIDUAL_RMS_NORM"
    assert plan.covers(6, 5120, "RESIDUAL_RMS_NORM") and not plan.covers(8, 5120, "NONE")
    assert plan.key == (4, 7, 4096, 8191) and plan.algorithms == (ONE, TWO, "nccl")


def test_two_shape_plans_a_call_could_both_read_are_refused() -> None:
    a = shape((4, 7), (4096, 8191), ROW)
    with pytest.raises(TableError, match=r"ws=4..7 hidden=4096..8191 fusion=NONE and ws=6\+ hidden=8000\+"):
        table(a, shape((6, None), (8000, None), ROW))
    # the same ranges for another fused op, and neighbouring ranges, are fine
    table(a, shape((4, 7), (4096, 8191), ROW, "RMS_NORM"), shape((8, None), (4096, 8191), ROW))


def test_decide_reads_the_plan_whose_ranges_hold_the_call() -> None:
    t = table(
        shape((4, 7), (4096, 8191), ROW), shape((8, 8), (1, None), (Band(None, (TWO,)),)), caps=((None, 1 << 20),)
    )
    d = decide(t, 100, 6, shape=TokenShape(10, 7168))
    assert (d.algorithm, d.unit, d.lower, d.upper) == (ONE, "tokens", 0, 63)
    assert "plan ws=4..7 hidden=4096..8191 fusion=NONE: band 1 tokens 1..63" in d.reason
    assert decide(t, 100, 7, shape=TokenShape(64, 4096)).algorithm == TWO
    assert decide(t, 100, 8, shape=TokenShape(5, 64)).algorithm == TWO
    assert decide(t, 2 << 20, 6, shape=TokenShape(64, 4096)).algorithm == "nccl"  # over the cap
    off = decide(t, 100, 3, shape=TokenShape(64, 4096))  # no plan answers TP 3: the plans' fallback
    assert off.algorithm == "nccl" and "no plan answers world size 3" in off.reason
    assert t.by_shape and t.fusions == ("NONE",) and t.plans == ()


def test_shape_plans_round_trip_through_toml_and_byte_tables_keep_their_text() -> None:
    t = table(shape((4, 7), (4096, 8191), ROW), shape((8, None), (1, None), (Band(None, (TWO,)),), "NONE", "RMS_NORM"))
    text = dumps_table(t)
    assert "[[shape_plan]]" in text and "world_size_upto = 7" in text and "hidden_upto = 8191" in text
    assert loads_table(text).shape_plans == t.shape_plans
    plain = Table(
        Platform("cpu", "x86_64"), Provenance("measured"), (Plan(2, "eager", (Band(None, ("gloo",)),), "gloo"),)
    )
    assert "shape_plan" not in table_to_dict(plain)


def legacy_plan(world_size: int, hidden: int, bands: str) -> str:
    """A shape row as tables were written before shape plans had their own type: a [[plan]] with hidden."""
    return (
        f'[[plan]]\nworld_size = {world_size}\nmode = "eager"\nfallback = "nccl"\nhidden = {hidden}\n'
        f'fusions = ["NONE"]\nbands = [{bands}]\n'
    )


LEGACY = (
    'schema = 1\nrules = "trtllm"\n[platform]\nkind = "cuda"\narch = "9.0"\n[provenance]\nsource = "published"\n'
    + legacy_plan(2, 128, '{upto = 63, algorithm = "trtllm_oneshot"}, {upto = "1024TiB", algorithm = "nccl"}')
    + legacy_plan(4, 128, '{upto = 15, algorithm = "trtllm_oneshot"}, {upto = "1024TiB", algorithm = "trtllm_twoshot"}')
    + legacy_plan(2, 256, '{upto = "1024TiB", algorithm = "trtllm_twoshot"}')
)


def test_a_table_written_before_shape_plans_had_their_type_still_reads() -> None:
    # rows as TensorRT-LLM's truncated log2 reads them: TP 2 row takes 2..3, TP 4 row 4..7; hidden 128 takes
    # 65..255 (a value above half the first row reads it), hidden 256 takes 256..511
    t = loads_table(LEGACY)
    assert {p.label for p in t.shape_plans} == {
        "ws=2..3 hidden=65..255 fusion=NONE",
        "ws=4..7 hidden=65..255 fusion=NONE",
        "ws=2..3 hidden=256..511 fusion=NONE",
    }
    assert decide(t, 0, 3, shape=TokenShape(10, 100)).algorithm == ONE
    assert decide(t, 0, 6, shape=TokenShape(20, 200)).algorithm == TWO
    assert decide(t, 0, 3, shape=TokenShape(10, 300)).algorithm == TWO
    assert decide(t, 0, 8, shape=TokenShape(10, 200)).algorithm == "nccl"  # TP 8: no row
    # written again, it is written the new way and reads back the same
    assert loads_table(dumps_table(t)).shape_plans == t.shape_plans


def test_pow2_ranges_are_the_values_a_truncated_log2_reads() -> None:
    assert pow2_ranges([2, 4, 8]) == {2: (2, 3), 4: (4, 7), 8: (8, 15)}
    assert pow2_ranges([128, 256]) == {128: (65, 255), 256: (256, 511)}
    assert pow2_ranges([6]) == {6: (6, 6)}  # not a power of two: itself alone


def test_check_lints_a_shape_plans_bands_and_names() -> None:
    bad = shape((1, None), (1, None), (Band(100, (ONE,)), Band(50, (TWO, TWO)), Band(None, ("fastest",))))
    codes = {f.code for f in check_table(table(bad))}
    assert {"T101", "T102", "T103"} <= codes


def test_diff_of_shape_tables_names_the_cells_that_move() -> None:
    a = table(shape((4, 7), (4096, 8191), ROW))
    b = table(shape((4, 7), (4096, 8191), (Band(127, (ONE,)), Band(1023, (TWO,)), Band(None, ("nccl",)))))
    (found,) = diff_tables(a, b)
    assert (found.lo, found.hi, found.a, found.b) == (64, 127, (TWO,), (ONE,))
    assert found.where == "ws=4..7 hidden=4096..8191 fusion=NONE"
