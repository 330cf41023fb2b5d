"""Plans per topology (world size, hosts): file format, decide, check, explain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import TableError
from artune.table import dumps_table, loads_table
from artune.table.check import check_table
from artune.table.decide import decide
from artune.table.io import digest
from artune.table.types import Band, Plan

HEAD = """schema = 1
[platform]
kind = "cpu"
arch = "x86_64"
[provenance]
source = "measured"
"""

SINGLE = """
[[plan]]
world_size = 4
mode = "eager"
fallback = "gloo"
bands = [{ upto = "1MiB", algorithm = "shm_one_shot" }]
"""

TWO_HOSTS = """
[[plan]]
world_size = 4
hosts = 2
fallback = "gloo"
bands = [{ upto = "64MiB", algorithm = "hier_shm" }]
"""


def test_schema_1_files_without_hosts_read_as_one_host_and_keep_their_text() -> None:
    table = loads_table(HEAD + SINGLE)
    assert table.plans[0].hosts == 1
    text = dumps_table(table)
    assert "hosts" not in text
    assert digest(loads_table(text)) == digest(table)


def test_hosts_round_trip_and_plans_differ_by_topology() -> None:
    table = loads_table(HEAD + SINGLE + TWO_HOSTS)
    assert [(p.world_size, p.hosts) for p in table.plans] == [(4, 1), (4, 2)]
    again = loads_table(dumps_table(table))
    assert again == table and "hosts = 2" in dumps_table(table)
    assert table.plan(4, "eager", hosts=2).bands[0].candidates == ("hier_shm",)
    assert table.plan(4, "eager").bands[0].candidates == ("shm_one_shot",)


@pytest.mark.parametrize("value", ["0", "5", "true", '"2"', "1.5"])
def test_bad_hosts_are_refused_by_name(value: str) -> None:
    with pytest.raises(TableError, match="hosts must be an integer from 1 to world_size"):
        loads_table(HEAD + TWO_HOSTS.replace("hosts = 2", f"hosts = {value}"))


def test_two_plans_for_one_topology_are_refused() -> None:
    with pytest.raises(TableError, match="two plans for world_size=4 hosts=2 mode=eager"):
        loads_table(HEAD + TWO_HOSTS + TWO_HOSTS)


def test_decide_uses_only_plans_for_the_number_of_hosts() -> None:
    table = loads_table(HEAD + SINGLE + TWO_HOSTS)
    one = decide(table, 4096, 4, "eager", None)
    assert (one.algorithm, one.hosts) == ("shm_one_shot", 1)
    two = decide(table, 4096, 4, "eager", None, hosts=2)
    assert (two.algorithm, two.hosts) == ("hier_shm", 2) and "plan ws=4 hosts=2 mode=eager" in two.reason
    assert two.as_dict()["plan"] == {"world_size": 4, "hosts": 2, "mode": "eager"}
    assert one.as_dict()["plan"] == {"world_size": 4, "mode": "eager"}
    # 3 hosts: the nearest smaller number of hosts with plans, said so
    three = decide(table, 4096, 6, "eager", None, hosts=3)
    assert three.algorithm == "hier_shm" and "using 2-host plans" in three.reason
    # no multi-host plans at all: the process group, never a single-host plan
    only_single = loads_table(HEAD + SINGLE)
    across = decide(only_single, 4096, 4, "eager", None, hosts=2)
    assert across.algorithm == "gloo" and "single-host plans do not apply" in across.reason
    with pytest.raises(ValueError, match="hosts must be an integer from 1 to world_size"):
        decide(table, 4096, 4, "eager", None, hosts=5)


def test_check_finds_topology_holes_and_misplaced_algorithms() -> None:
    plans = [Plan(ws, "eager", (Band(1 << 20, ("hier_shm",)),), "gloo", hosts=2) for ws in (2, 5)]  # holes at 3 and 4
    plans.append(Plan(6, "eager", (Band(1 << 20, ("shm_one_shot",)),), "gloo", hosts=2))
    table = loads_table(HEAD + SINGLE.replace("shm_one_shot", "hier_shm"))
    table = table.with_changes(plans=(*table.plans, *plans))
    found = [str(f) for f in check_table(table)]
    assert any("hosts=2: no plan for world sizes 3-4 (between 2 and 6)" in f for f in found), found
    assert any("ws=6 hosts=2 mode=eager: shm_one_shot runs only with every rank on one host" in f for f in found)
    assert any("ws=4 mode=eager: hier_shm runs only when the ranks span several hosts" in f for f in found)
    # a consistent table has no topology findings (its single-host holes at 2-3 are the usual lint)
    clean = [str(f) for f in check_table(loads_table(HEAD + SINGLE + TWO_HOSTS))]
    assert clean and not any("hosts" in f or "host" in f.split(": ", 2)[-1] for f in clean), clean


def test_explain_takes_hosts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.toml"
    path.write_text(HEAD + SINGLE + TWO_HOSTS)
    args = ["explain", "--table", str(path), "--world-size", "4", "--size", "4KiB", "--dtype", "float32"]
    assert main([*args, "--hosts", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algorithm"] == "hier_shm" and data["hosts"] == 2 and data["plan"]["hosts"] == 2
    assert main([*args, "--hosts", "2"]) == 0
    assert "world_size=4 on 2 hosts" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "shm_one_shot"
    assert main([*args, "--hosts", "5"]) == 2
