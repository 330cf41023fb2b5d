"""The decision: bands, candidates, parameters, the world-size and mode rules, overrides."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from artune.errors import OverrideError
from artune.table import apply_overrides, dumps_table, loads_table, parse_overrides
from artune.table.bundled import cpu_default
from artune.table.decide import decide
from artune.table.family import TableSet, family_chain
from artune.table.types import MODES, Mode

MiB = 1 << 20

TABLE = """
schema = 1
[platform]
kind = "cuda"
arch = "10.7"
[provenance]
source = "published"
date = "2026-11-29"
notes = "test table"
[[plan]]
world_size = 8
mode = "graph"
fallback = "nccl"
bands = [
  { upto = "2.438MiB", algorithm = "1shot_push" },
  { upto = "128MiB", algorithm = ["2shot_pull_mc", "2shot_pull"] },
]
params = { "1shot_push" = { blocks = 148 }, "2shot_pull_mc" = { blocks = 96 }, "2shot_pull" = { blocks = 96 } }
[[plan]]
world_size = 4
mode = "graph"
fallback = "nccl"
bands = [{ below = "1MiB", algorithm = "1shot_push" }]
params = { "1shot_push" = { blocks = 148 } }
"""


@pytest.fixture(scope="module")
def table():
    return loads_table(TABLE, "test.toml")


def test_bands_inclusive_bounds(table) -> None:
    edge = int(2.438 * MiB)
    assert decide(table, edge, 8, "graph").algorithm == "1shot_push"
    assert decide(table, edge + 1, 8, "graph").algorithm == "2shot_pull_mc"
    assert decide(table, 128 * MiB, 8, "graph").algorithm == "2shot_pull_mc"
    assert decide(table, 128 * MiB + 1, 8, "graph").algorithm == "nccl"
    assert decide(table, 0, 8, "graph").algorithm == "1shot_push"


def test_below_is_exclusive(table) -> None:
    assert decide(table, MiB - 1, 4, "graph").algorithm == "1shot_push"
    assert decide(table, MiB, 4, "graph").algorithm == "nccl"


def test_first_available_candidate_wins(table) -> None:
    decision = decide(table, 3 * MiB, 8, "graph", available={"2shot_pull", "nccl"})
    assert decision.algorithm == "2shot_pull"
    assert dict(decision.params) == {"blocks": 96}
    assert "2shot_pull_mc skipped" in decision.reason


def test_no_candidate_available_gives_fallback(table) -> None:
    decision = decide(table, 3 * MiB, 8, "graph", available=frozenset({"nccl"}))
    assert decision.algorithm == "nccl"
    assert "no candidate available" in decision.reason


def test_missing_required_param_skips_candidate() -> None:
    text = TABLE.replace('"2shot_pull_mc" = { blocks = 96 }, ', "")
    decision = decide(loads_table(text), 3 * MiB, 8, "graph")
    assert decision.algorithm == "2shot_pull"
    assert "no 'blocks' parameter" in decision.reason


def test_world_size_rule_nearest_smaller(table) -> None:
    decision = decide(table, 3 * MiB, 12, "graph")
    assert decision.algorithm == "2shot_pull_mc"
    assert decision.world_size == 8
    assert "nearest smaller" in decision.reason


def test_world_size_rule_no_smaller_plan(table) -> None:
    decision = decide(table, 1024, 2, "graph")
    assert decision.algorithm == "nccl"
    assert "no smaller plan" in decision.reason


def test_mode_rule(table) -> None:
    decision = decide(table, 1024, 8, "eager")
    assert decision.algorithm == "1shot_push"
    assert "no eager-mode plans" in decision.reason


def test_modes_are_one_enum_that_reads_and_writes_as_text(table) -> None:
    assert MODES == ("graph", "eager") and tuple(Mode) == (Mode.GRAPH, Mode.EAGER)
    plan = table.plan(8, "graph")
    assert plan is not None and plan.mode is Mode.GRAPH  # the reader builds the enum
    assert table.plan(8, Mode.GRAPH) is plan  # a member and its value find the same plan
    assert decide(table, 1024, 8, Mode.EAGER) == decide(table, 1024, 8, "eager")
    assert 'mode = "graph"' in dumps_table(table) and f"{Mode.EAGER}" == "eager"


def test_reason_carries_provenance(table) -> None:
    assert "provenance: published" in decide(table, 1024, 8, "graph").reason


@given(st.integers(min_value=0, max_value=1 << 40), st.integers(min_value=1, max_value=64))
def test_decide_never_fails_for_valid_input(nbytes: int, world_size: int) -> None:
    table = loads_table(TABLE)
    for mode in ("graph", "eager"):
        decision = decide(table, nbytes, world_size, mode)
        assert decision.algorithm
        assert decision.reason


def test_decide_rejects_bad_input(table) -> None:
    with pytest.raises(ValueError, match="nbytes"):
        decide(table, -1, 8, "graph")
    with pytest.raises(ValueError, match="mode"):
        decide(table, 1, 8, "fast")
    with pytest.raises(ValueError, match="world_size"):
        decide(table, 1, 0, "graph")


def test_override_forces_algorithm(table) -> None:
    forced = apply_overrides(table, parse_overrides("nccl", None, "ARTUNE_ALGORITHM"))
    decision = decide(forced, 1024, 8, "graph")
    assert decision.algorithm == "nccl"
    assert "ARTUNE_ALGORITHM" not in decision.reason or "override" in decision.reason
    assert "user override" in decision.reason


def test_override_moves_a_bound(table) -> None:
    moved = apply_overrides(table, parse_overrides(None, "1shot_push=4MiB", "--bound"))
    assert decide(moved, 4 * MiB, 8, "graph").algorithm == "1shot_push"
    assert decide(moved, 4 * MiB + 1, 8, "graph").algorithm == "2shot_pull_mc"
    assert "1shot_push bands end at 4MiB" in decide(moved, 1, 8, "graph").reason
    swallowed = apply_overrides(table, parse_overrides(None, "1shot_push=200MiB", "--bound"))
    assert decide(swallowed, 150 * MiB, 8, "graph").algorithm == "1shot_push"
    assert decide(swallowed, 200 * MiB + 1, 8, "graph").algorithm == "nccl"


@pytest.mark.parametrize(
    ("algorithm", "bounds", "message"),
    [
        ("fastest", None, "unknown algorithm"),
        (None, "1shot_push", "must look like"),
        (None, "1shot_push=lots", "cannot read"),
        (None, "gloo=1MiB", "no plan"),
    ],
)
def test_bad_overrides(table, algorithm, bounds, message) -> None:
    with pytest.raises(OverrideError, match=message):
        apply_overrides(table, parse_overrides(algorithm, bounds, "test"))


def test_family_chain() -> None:
    assert family_chain("10.7") == ("10.3", "10.0")
    assert family_chain("10.9") == ("10.0",)
    assert family_chain("9.0") == ()
    assert family_chain("x86_64") == ()


def test_family_borrowing_is_loud(table, caplog) -> None:
    tables = TableSet("test", "cuda", {"10.0": table})
    borrowed = tables.resolve("10.7")
    assert "borrowed arch 10.0" in decide(borrowed, 1024, 8, "graph").reason
    assert any("artune tune" in r.message for r in caplog.records)
    unknown = tables.resolve("8.0")
    decision = decide(unknown, 1024, 8, "graph")
    assert decision.algorithm == "nccl"
    assert "conservative default" in decision.reason


def test_cpu_default_is_deepspeeds_rule() -> None:
    table = cpu_default()
    assert decide(table, MiB - 1, 2).algorithm == "shm_one_shot"
    assert decide(table, MiB, 2).algorithm == "shm_two_shot"
    assert decide(table, MiB, 2, available={"gloo"}).algorithm == "gloo"


def test_an_open_ended_band_covers_every_larger_size() -> None:
    table = cpu_default()  # [0, 1MiB) one-shot, [1MiB, inf) two-shot
    for nbytes in (MiB, 1 << 40, 1 << 60):  # beyond any size a file can name
        found = decide(table, nbytes, 2)
        assert (found.algorithm, found.lower, found.upper) == ("shm_two_shot", MiB, None)
        assert "band 2 [1MiB, inf) -> shm_two_shot" in found.reason and "TiB" not in found.reason
    # the fallback still runs where the band's algorithm cannot
    assert decide(table, 1 << 40, 2, available={"gloo"}).algorithm == "gloo"
    # moving its bound makes it bounded again: the fallback takes the sizes above
    moved = apply_overrides(table, parse_overrides(None, "shm_two_shot=64MiB"))
    assert decide(moved, 64 * MiB + 1, 2).algorithm == "gloo"
    assert "above the last band (64MiB, inf)" in decide(moved, 64 * MiB + 1, 2).reason


def test_a_decision_without_a_plan_says_so_in_json(table) -> None:
    found = decide(table, 4096, 2, "graph")  # below every plan: the nearest larger plan's fallback
    assert found.algorithm == "nccl" and found.as_dict()["plan"] is None
    assert decide(table, 4096, 8, "graph").as_dict()["plan"] == {"world_size": 8, "mode": "graph"}


MULTICAST_TABLE = """
schema = 1
[platform]
kind = "cuda"
arch = "10.3"
[provenance]
source = "published"
[[plan]]
world_size = 2
mode = "eager"
fallback = "nccl"
bands = [{ below = "4MiB", algorithm = "custom_ar" }, { upto = "4MiB", algorithm = "symm_mem_two_shot" }]
[[plan]]
world_size = 2
multicast = false
mode = "eager"
fallback = "nccl"
bands = [{ below = "8MiB", algorithm = "custom_ar" }]
[[plan]]
world_size = 4
multicast = true
mode = "eager"
fallback = "nccl"
bands = [{ below = "1MiB", algorithm = "custom_ar" }]
"""


def test_the_plan_for_the_calls_machine_decides() -> None:
    """A plan for machines without multicast decides their calls; the plan for any machine decides the rest."""
    table = loads_table(MULTICAST_TABLE, "mc.toml")
    n = 6 * MiB
    bare = decide(table, n, 2, "eager", multicast=False)
    assert bare.algorithm == "custom_ar" and bare.multicast is False and "ws=2 multicast=off" in bare.reason
    assert bare.as_dict()["plan"] == {"world_size": 2, "mode": "eager", "multicast": False}
    for multicast in (True, None):  # no plan for machines with multicast: the plan for any machine
        found = decide(table, n, 2, "eager", multicast=multicast)
        assert (found.algorithm, found.multicast) == ("nccl", None)
        assert found.as_dict()["plan"] == {"world_size": 2, "mode": "eager"}
    assert decide(table, 3 * MiB, 2, "eager", multicast=True).algorithm == "custom_ar"
    # a call that does not say is for any machine: a plan for one kind of machine never decides it
    assert decide(table, 4096, 4, "eager", multicast=True).algorithm == "custom_ar"
    unsaid = decide(table, 4096, 4, "eager")
    assert unsaid.world_size == 2 and "nearest smaller world size" in unsaid.reason
    assert decide(table, 4096, 4, "eager", multicast=False).world_size == 2
    with pytest.raises(ValueError, match="multicast must be"):
        decide(table, 4096, 2, "eager", multicast="yes")  # type: ignore[arg-type]


def test_multicast_plans_round_trip_and_leave_other_files_unchanged() -> None:
    from artune.table.io import digest, dumps_table

    table = loads_table(MULTICAST_TABLE, "mc.toml")
    assert [p.multicast for p in table.plans] == [None, False, True]
    again = loads_table(dumps_table(table), "again.toml")
    assert again.plans == table.plans and digest(again) == digest(table)
    text = dumps_table(loads_table(TABLE, "test.toml"))
    assert "multicast" not in text  # plans for any machine write no key: old files and digests are unchanged
    assert digest(loads_table(text, "x.toml")) == digest(loads_table(TABLE, "test.toml"))
    # two plans for one key differ by machine; the same machine twice is refused
    from artune.errors import TableError

    with pytest.raises(TableError, match="two plans for world_size=2 mode=eager multicast=False"):
        loads_table(
            MULTICAST_TABLE.replace("multicast = true", "multicast = false").replace(
                "world_size = 4", "world_size = 2"
            ),
            "dup.toml",
        )
    with pytest.raises(TableError, match="multicast must be true or false"):
        loads_table(MULTICAST_TABLE.replace("multicast = true", 'multicast = "on"'), "bad.toml")


def test_diff_compares_the_plans_for_one_kind_of_machine_too() -> None:
    from artune.table.diff import diff_tables

    table = loads_table(MULTICAST_TABLE, "mc.toml")
    anywhere = table.with_changes(plans=tuple(p for p in table.plans if p.multicast is None))
    found = diff_tables(anywhere, table, world_size=2, mode="eager")
    # sizes both machines share are not repeated; without multicast, custom_ar takes what symmetric memory had
    assert [(d.where, d.lo, d.hi, d.a, d.b) for d in found] == [
        ("ws=2 mode=eager multicast=off", 4 * MiB, 4 * MiB, ("symm_mem_two_shot", "nccl"), ("custom_ar", "nccl")),
        ("ws=2 mode=eager multicast=off", 4 * MiB + 1, 8 * MiB - 1, ("nccl",), ("custom_ar", "nccl")),
    ]
    assert diff_tables(table, table) == []
