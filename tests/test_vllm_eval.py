"""vLLM read by its own code: what releases change that only their code says, and ``artune verify-engine``.

The releases are downloaded once and cached (about 330 MB each; skipped offline without them). A mutated copy
of a release is a pull request no release had: its readings are kept in the test's own folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import ReleaseUnavailable
from artune.formats import fingerprints, read_engine
from artune.formats.releases import fetch_release
from artune.oracles import vllm as oracle
from artune.table.decide import decide
from artune.table.types import CaveatKind, NVLinkDomain
from test_mutations_vllm import CUSTOM, inserted

MiB = 1 << 20


def release(version: str) -> Path:
    try:
        fetch_release("flashinfer-python", oracle.FLASHINFER)
        return fetch_release("vllm", version)
    except ReleaseUnavailable as err:
        pytest.skip(f"vllm=={version} is not cached and cannot be downloaded: {err}")


def _decide(version: str, arch: str, ws: int, nbytes: int, hosts: int = 1, multicast: bool = True) -> str:
    from artune import catalog

    table = read_engine("vllm", str(release(version))).tables.resolve(arch)
    nvlink = NVLinkDomain.RACK if hosts > 1 else None
    available = catalog.available(ws, "bfloat16", nbytes, multicast, hosts)
    return decide(table, nbytes, ws, "eager", available, hosts=hosts, multicast=multicast, nvlink=nvlink).algorithm


def test_what_only_the_code_says_is_read_release_by_release() -> None:
    # 0.29-0.32 store FlashInfer's tuned bound as int(mb * MiB) - 1 and compare '>': 80 MB itself is refused;
    # 0.33 stores int(mb * MiB): 80 MB runs FlashInfer (10.3 ws=4, FI_MNNVL_ALLREDUCE_MAX_SIZE_MB[(103, 4, 1)])
    assert _decide("0.29.0", "10.3", 4, 80 * MiB) == "nccl"
    assert _decide("0.29.0", "10.3", 4, 80 * MiB - 16) == "flashinfer_ar"
    assert _decide("0.33.0", "10.3", 4, 80 * MiB) == "flashinfer_ar"
    # 0.34's should_custom_ar refuses mnnvl_only: custom all-reduce no longer runs across hosts (ws=2, one rack),
    # which 0.33 ran; the tables are the same, only the code moved
    ours33 = read_engine("vllm", str(release("0.33.0"))).tables.resolve("10.0").plan(2, "eager", 2, None, "rack")
    ours34 = read_engine("vllm", str(release("0.34.0"))).tables.resolve("10.0").plan(2, "eager", 2, None, "rack")
    assert ours33 is not None and ours34 is not None
    assert "custom_ar" in ours33.algorithms and "custom_ar" not in ours34.algorithms


def test_verify_engine_runs_the_engines_code_and_says_so(capsys) -> None:
    release("0.10.0")
    assert main(["verify-engine", "vllm==0.10.0", "--platform", "cuda"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("artune verify-engine executes vLLM's own dispatch code (its communicators' Python")
    assert "from vllm==0.10.0 in a stand-in world" in out[0]
    assert "check, explain and review never do" in out[0]
    assert any(line.strip().startswith("2 hosts rack: ") and line.endswith(" agree") for line in out)
    assert any("the engine ran: custom_ar" in line for line in out)
    assert out[1].startswith("vllm==0.10.0: ") and " probes on cuda, " in out[1]
    assert main(["verify-engine", "vllm==0.10.0", "--platform", "rocm", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["agree"] and data["differ"] == 0 and all(" gfx" in name for name in data["topologies"])
    # fingerprints are kept only for a release verified on every platform
    assert main(["verify-engine", "vllm==0.10.0", "--platform", "cuda", "--record"]) == 2
    assert "drop --platform" in capsys.readouterr().err


def test_verify_engine_shows_the_first_differences_of_code_it_cannot_follow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    root = tmp_path / "vllm"
    shutil.copytree(release("0.10.0") / "vllm", root / "vllm")
    path = root / CUSTOM
    check = "import ctypes\nif ctypes.sizeof(ctypes.c_int) == 4:\n    return False"
    path.write_text(inserted("CustomAllreduce", "should_custom_ar", check)(path.read_text()))
    assert main(["verify-engine", f"vllm:{root}", "--differences", "3", "--platform", "cuda"]) == 1
    out = capsys.readouterr().out
    assert out.count("  differs: Probe(") == 3 and "engine nccl, artune custom_ar" in out
    # artune says where it could not follow the code, and what it assumed
    assert main(["explain", "--table", f"vllm:{root}", "--arch", "9.0", "--world-size", "4", "--size", "4KiB"]) == 0
    explained = capsys.readouterr().out
    assert "unverified: CustomAllreduce.should_custom_ar" in explained and "the condition is false" in explained
    assert main(["verify-engine", f"vllm:{root}", "--record"]) == 2
    assert "--record keeps a release's fingerprints" in capsys.readouterr().err


def test_verify_engine_refuses_what_it_cannot_run(tmp_path: Path, capsys) -> None:
    assert main(["verify-engine", "nothing:here"]) == 2
    assert "give ENGINE==VERSION or ENGINE:PATH" in capsys.readouterr().err
    assert main(["verify-engine", f"vllm:{tmp_path / 'missing'}"]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    # a platform the source has no code for: said, not a run of 0 probes that "agree"
    header = Path(__file__).parent / "fixtures" / "trtllm-005b299"
    assert main(["verify-engine", f"trtllm:{header}", "--platform", "rocm"]) == 2
    assert "has no rocm probes" in capsys.readouterr().err


def test_record_keeps_a_verified_releases_fingerprints_only_once_all_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    release("0.10.0")
    target = tmp_path / "verified.json"
    monkeypatch.setattr(fingerprints, "_path", lambda engine: target)
    assert main(["verify-engine", "vllm==0.10.0", "--record"]) == 0
    assert f"recorded the fingerprints of its dispatch functions in {target}" in capsys.readouterr().out
    kept = fingerprints.load_verified("vllm")
    assert kept["CustomAllreduce.should_custom_ar"] and all(
        releases == ("0.10.0",) for prints in kept.values() for releases in prints.values()
    )


def test_a_function_no_verified_release_has_is_named_with_the_nearest(tmp_path: Path, monkeypatch) -> None:
    """A pull request's should_custom_ar: E402 names it, where it is, and the release it is nearest."""
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    if "0.34.0" not in {
        r for prints in fingerprints.load_verified("vllm").values() for rs in prints.values() for r in rs
    }:
        pytest.skip("vLLM 0.34.0 is not among the verified releases (verified.json)")
    root = tmp_path / "vllm"
    shutil.copytree(release("0.34.0") / "vllm", root / "vllm")
    path = root / CUSTOM
    path.write_text(inserted("CustomAllreduce", "should_custom_ar", "inp_size = 0")(path.read_text()))
    caveats = read_engine("vllm", str(root)).tables.resolve("10.3").caveats
    (changed,) = [c for c in caveats if c.kind is CaveatKind.UNFAMILIAR]
    assert changed.function == "CustomAllreduce.should_custom_ar" and changed.where.startswith(f"{path}:")
    # the assignment is overwritten before it is read (by construction): no decision moves, and E402 says so
    assert changed.detail == (
        "differs from every release artune was checked against; nearest 0.34.0; every decision read is "
        "vLLM 0.34.0's (both evaluated)"
    )
    assert not read_engine("vllm", str(release("0.34.0"))).tables.resolve("10.3").caveats


def test_a_release_never_verified_says_so_where_its_functions_match(monkeypatch: pytest.MonkeyPatch) -> None:
    from artune.formats.vllm import read

    root = release("0.10.1")
    kept = {f.function: {f.fingerprint: ("0.10.0",)} for f in read.evaluated(str(root))}
    monkeypatch.setattr(read, "_READINGS", {})  # read again, with the verified releases below
    monkeypatch.setattr(fingerprints, "load_verified", lambda engine, verified=None: kept)
    (note,) = [f for f in read_engine("vllm", str(root)).findings if f.code == "V107"]
    assert note.severity == "note" and "vLLM 0.10.1 is not among the releases artune verified" in note.message
    assert note.message.endswith("matches vLLM 0.10.0's")
