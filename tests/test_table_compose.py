"""Tables compose: what a tuned table does not cover, the next table in the selection order answers."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from artune import machine
from artune.launch import RankContext, run_ranks
from artune.settings import from_env
from artune.table.bundled import cpu_default
from artune.table.cache import cached_table_path
from artune.table.decide import decide
from artune.table.io import dump_table
from artune.table.selection import compose, select_table
from artune.table.types import Band, Plan, Platform, Provenance, Table

MEASURED = Provenance("measured", tool="artune")
ONE_HOST = Plan(2, "eager", (Band(None, ("shm_two_shot",)),), "gloo")


def _measured(*plans: Plan) -> Table:
    return Table(Platform("cpu", "x86_64"), MEASURED, plans, origin="measured.toml")


def test_a_topology_the_measured_table_lacks_is_answered_by_the_bundled_plan() -> None:
    table = compose([("measured.toml", _measured(ONE_HOST)), ("bundled:cpu", cpu_default())])
    across = decide(table, 4096, 4, "eager", None, hosts=2)
    assert across.algorithm == "hier_shm"
    assert "answered by bundled:cpu, since measured.toml has no ws=2 hosts=2 mode=eager plan" in across.reason
    assert "provenance: modelled" in across.reason  # the bundled 2-host plan is modelled, and says so
    # the key the measured table covers stays the measured one (the bundled rule would pick one-shot here)
    assert decide(table, 4096, 2, "eager").algorithm == "shm_two_shot"


def test_a_measured_plan_beats_the_bundled_one_for_the_same_key() -> None:
    across = Plan(2, "eager", (), "gloo", hosts=2)
    table = compose([("measured.toml", _measured(ONE_HOST, across)), ("bundled:cpu", cpu_default())])
    decision = decide(table, 4096, 4, "eager", None, hosts=2)
    assert decision.algorithm == "gloo" and "bundled" not in decision.reason
    assert table.plans == (ONE_HOST, across)


def test_only_tables_of_artune_rules_and_the_same_platform_compose() -> None:
    engine = Table(Platform("cpu", "x86_64"), MEASURED, (ONE_HOST,), rules="sglang")
    assert compose([("engine", engine), ("bundled:cpu", cpu_default())]) is engine
    gpu = Table(Platform("cuda", "9.0"), MEASURED, (Plan(8, "graph", (), "nccl"),))
    assert compose([("gpu", gpu), ("bundled:cpu", cpu_default())]) is gpu


def _across_hosts(ctx: RankContext, cache: str, then: str) -> list[tuple[str, str]]:
    """Four ranks as two simulated hosts, each with the Communicator's own choice of table: once with the
    installed table as it is, once after rank 0 installed ``then`` in its place."""
    import torch
    import torch.distributed as dist

    from artune import Communicator

    os.environ["ARTUNE_CACHE_DIR"] = cache
    os.environ["ARTUNE_HOST"] = "ab"[ctx.rank // 2]
    seen = []
    for step in range(2):
        if step == 1:
            if ctx.rank == 0:
                Path(cached_table_path(Path(cache), machine.fingerprint())).write_text(then)
            dist.barrier()
        with Communicator(timeout=30, check=False) as comm:
            decision = comm.decide(torch.ones(1024))
            t = torch.full((1024,), float(ctx.rank))
            comm.all_reduce(t)
            assert float(t[0]) == 6.0
        seen.append((decision.algorithm, decision.reason))
    return seen


@pytest.mark.timeout(300)
def test_with_a_one_host_table_installed_ranks_across_hosts_keep_hier_shm(tmp_path: Path) -> None:
    """What ``artune tune`` installs (``tests/test_tune_cli.py`` runs one): a measured table of this machine with
    one-host plans only. Four ranks on two simulated hosts take the bundled 2-host plan from it."""
    cache = tmp_path / "cache"
    installed = cached_table_path(cache, machine.fingerprint())
    installed.parent.mkdir(parents=True, exist_ok=True)
    tuned = Table(machine.cpu_platform(), MEASURED, (ONE_HOST, replace(ONE_HOST, world_size=4)))
    dump_table(tuned, installed)
    settings = from_env({"ARTUNE_CACHE_DIR": str(cache)})
    assert decide(select_table(None, settings), 4096, 4, "eager", None, hosts=2).algorithm == "hier_shm"

    # then a measured 2-host plan, installed, wins over the bundled modelled one
    then = tmp_path / "then.toml"
    dump_table(tuned.with_changes(plans=(*tuned.plans, Plan(2, "eager", (), "gloo", hosts=2))), then)
    for (algorithm, reason), (after, after_reason) in run_ranks(
        _across_hosts, 4, str(cache), then.read_text(), timeout=120
    ):
        assert algorithm == "hier_shm", reason
        assert "answered by the bundled default (bundled:cpu), since this machine's measured table has no" in reason, (
            reason
        )
        assert after == "gloo" and "bundled" not in after_reason, after_reason
