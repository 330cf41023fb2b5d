"""Which benchmark printed a file, and its reader: one entry point for every evidence format."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from artune.errors import EvidenceError
from artune.evidence import nccl_tests, sglang_bench, trtllm_csv, vllm_bench
from artune.evidence.sweep import BenchmarkSweep

FORMATS = ("vllm-text", "vllm-json", "nccl-tests", "sglang-markdown", "sglang-jit", "trtllm-csv")


def detect(text: str) -> str:
    """The format of ``text`` (one of ``FORMATS``), or ``EvidenceError`` naming what artune reads."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if vllm_bench.is_json(data):
            return "vllm-json"
    if trtllm_csv.is_csv(text):
        return "trtllm-csv"
    if vllm_bench.is_text(text):
        return "vllm-text"
    if nccl_tests.is_nccl_tests(text):
        return "nccl-tests"
    if sglang_bench.is_markdown(text):
        return "sglang-markdown"
    if sglang_bench.is_jit(text):
        return "sglang-jit"
    raise EvidenceError(
        "not the output of a benchmark artune reads: vLLM benchmark_device_communicators.py (its table or "
        "--output-json), nccl-tests all_reduce_perf, SGLang's all-reduce benchmarks, or TensorRT-LLM "
        "all_reduce.py --save_csv"
    )


def read_text(
    text: str,
    source: str = "<evidence>",
    *,
    world_size: int | None = None,
    mode: str | None = None,
    arch: str = "",
) -> BenchmarkSweep:
    """``text`` as the sweep its benchmark printed. ``world_size`` and ``mode`` are for formats that do not
    print them (SGLang's, TensorRT-LLM's CSV); where the file prints them they must agree."""
    try:
        kind = detect(text)
    except EvidenceError as err:
        raise EvidenceError(f"{source}: {err}") from None
    if kind == "vllm-json":
        sweep = vllm_bench.read_json(text, source)
    elif kind == "vllm-text":
        sweep = vllm_bench.read_text(text, source)
    elif kind == "nccl-tests":
        sweep = nccl_tests.read(text, source)
    elif kind == "sglang-markdown":
        sweep = sglang_bench.read_markdown(text, source, world_size, mode)
    elif kind == "sglang-jit":
        sweep = sglang_bench.read_jit(text, source, world_size)
    else:
        sweep = trtllm_csv.read(text, source, world_size, mode)
    if world_size is not None and sweep.world_size != world_size:
        raise EvidenceError(f"{source}: the sweep is at world size {sweep.world_size}, not {world_size}")
    if mode is not None and sweep.mode != mode:
        raise EvidenceError(f"{source}: the sweep was timed in {sweep.mode} mode ({sweep.timing}), not {mode}")
    return replace(sweep, arch=arch) if arch else sweep


def read_evidence(
    path: str | Path,
    *,
    world_size: int | None = None,
    mode: str | None = None,
    arch: str = "",
) -> BenchmarkSweep:
    """The sweep in the benchmark output at ``path`` (see ``read_text``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise EvidenceError(f"{path}: cannot read the evidence file ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise EvidenceError(f"{path}: not a text file; give the benchmark's printed output or its JSON/CSV") from None
    return read_text(text, str(path), world_size=world_size, mode=mode, arch=arch)
