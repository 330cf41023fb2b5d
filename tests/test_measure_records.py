"""Candidates, measurements and the append-only, resumable measurement log."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from artune import machine
from artune.errors import ArtuneError
from artune.measure.records import Candidate, Header, Measurement, MeasurementLog


def _m(algorithm: str = "gloo", size: int = 4096, **kw: object) -> Measurement:
    base = dict(
        candidate=Candidate(algorithm),
        size_bytes=size,
        dtype="float32",
        world_size=2,
        samples_us=(10.0, 11.0, 12.5),
        nwrong=0,
    )
    base.update(kw)
    return Measurement(**base)  # type: ignore[arg-type]


def test_candidate_key_is_canonical_and_hashable() -> None:
    a = Candidate.of("shm_two_shot", {"chunk_bytes": 1048576, "alpha": True})
    b = Candidate("shm_two_shot", (("chunk_bytes", 1048576), ("alpha", True)))
    assert a == b and hash(a) == hash(b)
    assert a.key == "shm_two_shot[alpha=true,chunk_bytes=1048576]"
    assert a.params_dict == {"alpha": True, "chunk_bytes": 1048576}
    assert Candidate("gloo").key == "gloo"
    assert len({a, b, Candidate("gloo")}) == 2


def test_measurement_key() -> None:
    m = _m("shm_one_shot", 65536)
    assert m.key == "shm_one_shot size=65536 dtype=float32 redop=sum world_size=2"
    assert m.key != replace(m, world_size=4).key != replace(m, dtype="bfloat16").key


def test_failed_measurements_are_explicit_values() -> None:
    m = _m(status="timeout", error="PeerTimeout: rank 1", samples_us=())
    assert not m.ok
    assert m.time_us == math.inf and m.p20_us == math.inf and m.p99_us == math.inf
    assert m.algbw_GBps == 0.0 and m.busbw_GBps == 0.0
    assert math.isnan(m.cv_pct)
    back = Measurement.from_dict(json.loads(json.dumps(m.to_dict(), allow_nan=False)))
    assert back == m
    assert back.status == "timeout" and back.error == "PeerTimeout: rank 1"
    with pytest.raises(ArtuneError, match="status"):
        _m(status="slow")


def _header(tmp: Path, **changes: object) -> Header:
    header = Header.for_this_machine(world_size=2)
    return replace(header, **changes) if changes else header


def test_header_describes_this_machine(tmp_path: Path) -> None:
    header = _header(tmp_path)
    plat, digest = machine.cpu_platform(), machine.fingerprint()
    assert header.platform == {"kind": "cpu", "arch": plat.arch, "device": plat.device}
    assert header.host_fingerprint == digest and len(digest) == 12
    assert {"artune", "torch", "numpy", "python"} <= set(header.versions)
    assert header.date and header.schema == 1


def test_log_round_trip_append_only_and_resume(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    header = _header(tmp_path)
    log = MeasurementLog(path, header)
    first = [_m(), _m("shm_one_shot")]
    log.extend(first)
    failed = _m("shm_two_shot", status="runtime", error="RuntimeError: boom", samples_us=(), nwrong=-1)
    log.append(failed)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header" and len(lines) == 4
    before = path.read_text()

    resumed = MeasurementLog(path, _header(tmp_path, date="2001-01-01T00:00:00+00:00"))  # same hardware
    assert resumed.header == header  # the file's own header is kept
    assert resumed.read() == [*first, failed]
    assert resumed.keys() == {_m().key, _m("shm_one_shot").key, failed.key}
    assert _m().key in resumed
    resumed.append(_m("gloo", 65536))
    assert path.read_text().startswith(before)  # append-only
    assert len(MeasurementLog(path).read()) == 4


def test_log_keeps_every_repeat_and_latest_wins(tmp_path: Path) -> None:
    log = MeasurementLog(tmp_path / "m.jsonl", _header(tmp_path))
    log.append(_m(samples_us=(1.0,)))
    log.append(_m(samples_us=(2.0,)))
    assert len(log) == 2
    assert log.latest()[_m().key].time_us == 2.0


@pytest.mark.parametrize(
    "changes",
    [
        {"host_fingerprint": "000000000000"},
        {"world_size": 4},
        {"platform": {"kind": "cpu", "arch": "aarch64", "device": "Neoverse"}},
        {"schema": 99},
    ],
)
def test_log_refuses_other_hardware(tmp_path: Path, changes: dict[str, object]) -> None:
    path = tmp_path / "m.jsonl"
    MeasurementLog(path, _header(tmp_path)).append(_m())
    with pytest.raises(ArtuneError, match="refusing to mix"):
        MeasurementLog(path, _header(tmp_path, **changes))
    assert len(MeasurementLog(path).read()) == 1  # untouched


def test_append_refuses_other_world_size(tmp_path: Path) -> None:
    log = MeasurementLog(tmp_path / "m.jsonl", _header(tmp_path))
    with pytest.raises(ArtuneError, match="world_size=4"):
        log.append(_m(world_size=4))


def test_torn_last_line_is_skipped_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    log = MeasurementLog(path, _header(tmp_path))
    log.append(_m())
    with path.open("a") as out:
        out.write('{"type": "measurement", "algo')  # a crash mid-write
    assert MeasurementLog(path).read() == [_m()]
    log.append(_m("shm_one_shot"))
    assert [m.candidate.algorithm for m in MeasurementLog(path).read()] == ["gloo", "shm_one_shot"]


def test_not_a_log(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(ArtuneError, match="not an artune measurement log"):
        MeasurementLog(path)
    with pytest.raises(ArtuneError, match="no header"):
        MeasurementLog(tmp_path / "missing.jsonl")
