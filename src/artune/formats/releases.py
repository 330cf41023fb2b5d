"""The engines' released wheels, as a table source: ``vllm==0.33.0``, ``sglang==0.5.23``.

A release is what users run, so it is what artune must read: ``artune check
sglang==0.5.23`` downloads the wheel from the package registry once
(``pip download --no-deps``), keeps only the files that hold the engine's
all-reduce dispatch (``MEMBERS``), and reads them as it reads a checkout.
Nothing from the wheel is run. The unpacked files are cached under
``$ARTUNE_RELEASES_DIR``, by default ``releases`` in artune's cache (``artune.settings.cache_root``:
``$ARTUNE_CACHE_DIR``, ``$XDG_CACHE_HOME/artune``, ``~/.cache/artune``); naming the releases' folder apart lets
tests with a private cache share one download of each release.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from artune.errors import ReleaseUnavailable, TableError
from artune.settings import cache_root

# the wheel's files artune reads: the communicators, their settings and the configs they import
MEMBERS: dict[str, tuple[str, ...]] = {
    "vllm": (
        "vllm/distributed/device_communicators/",
        "vllm/distributed/parallel_state.py",
        "vllm/envs.py",
        "vllm/platforms/cuda.py",
        "vllm/config/parallel.py",
        "vllm/config/compilation.py",  # PassConfig.default_fi_allreduce_fusion_max_size_mb: FlashInfer's bound
        "vllm/compilation/collective_fusion.py",
        "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
    ),
    "sglang": (
        "sglang/srt/distributed/",
        "sglang/srt/environ.py",
        "sglang/kernels/ops/communication/all_reduce.py",
    ),
    # FlashInfer's MNNVL all-reduce workspace, the one vLLM's FlashInfer path asks whether a call fits
    # (is_buffer_size_sufficient): the vLLM oracle runs it; it is no table source
    "flashinfer-python": (
        "flashinfer/comm/trtllm_mnnvl_ar.py",
        "flashinfer/comm/workspace_base.py",
        "flashinfer/comm/mnnvl.py",
    ),
}
_NOT_SOURCES = frozenset({"flashinfer-python"})
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!-]*$")
DOWNLOAD_TIMEOUT_S = 900


def releases_dir() -> Path:
    """Where unpacked releases are cached (``ARTUNE_RELEASES_DIR``, default ``releases`` in the cache root,
    ``artune.settings.cache_root``)."""
    return Path(os.environ.get("ARTUNE_RELEASES_DIR") or cache_root() / "releases")


def release_spec(spec: str) -> tuple[str, str] | None:
    """``("sglang", "0.5.23")`` for ``"sglang==0.5.23"``; ``None`` for any other table name."""
    engine, sep, version = spec.partition("==")
    if not sep or engine not in MEMBERS or engine in _NOT_SOURCES:
        return None
    if not _VERSION.match(version):
        raise TableError(f"{spec}: {version!r} is not a release version; give one such as {engine}==0.5.23")
    return engine, version


def fetch_release(engine: str, version: str) -> Path:
    """The folder holding ``engine==version``'s dispatch files, downloading and unpacking it the first time.

    ``ReleaseUnavailable`` names the release and pip's reason when it cannot
    be downloaded. The folder is filled in a temporary sibling and renamed
    into place, so a download cut short leaves nothing that looks complete.
    """
    if engine not in MEMBERS:
        raise TableError(f"{engine}: no released wheels known; known: {', '.join(MEMBERS)}")
    target = releases_dir() / f"{engine}-{version}"
    stamp = "\n".join(MEMBERS[engine]) + "\n"  # a copy made for fewer members is made again
    if target.is_dir() and _read(target / "MEMBERS") == stamp:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{engine}-{version}-", dir=target.parent) as work:
        wheel = _download(engine, version, Path(work) / "wheel")
        unpacked = Path(work) / "files"
        _unpack(wheel, MEMBERS[engine], unpacked)
        (unpacked / "WHEEL").write_text(wheel.name + "\n")
        (unpacked / "MEMBERS").write_text(stamp)
        if target.is_dir() and _read(target / "MEMBERS") == stamp:
            return target  # another process finished first: its copy is as good as ours, and may be in use
        if target.is_dir():
            target.rename(Path(work) / "stale")  # removed with the temporary folder
        try:
            unpacked.rename(target)
        except OSError:
            if not target.is_dir():  # another process finished first: its copy is as good as ours
                raise
    return target


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _download(engine: str, version: str, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(into), f"{engine}=={version}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ReleaseUnavailable(
            f"{engine}=={version}: pip download did not finish in {DOWNLOAD_TIMEOUT_S} s; is the package "
            "registry reachable?"
        ) from None
    wheels = sorted(into.glob("*.whl")) if into.is_dir() else []
    if done.returncode != 0 or not wheels:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"pip exited with {done.returncode} and saved no wheel"
        raise ReleaseUnavailable(f"{engine}=={version}: cannot download the wheel: {reason}")
    return wheels[0]


def _unpack(wheel: Path, members: tuple[str, ...], into: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.endswith(".py") and n.startswith(members)]
            if not names:
                raise TableError(f"{wheel.name}: none of {', '.join(members)} is in the wheel")
            for name in names:
                path = into / name
                if ".." in Path(name).parts:
                    raise TableError(f"{wheel.name}: member {name!r} points outside the wheel")
                path.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(name) as src, path.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    except zipfile.BadZipFile as err:
        raise TableError(f"{wheel.name}: not a readable wheel ({err})") from err


def display_path(path: Path) -> str:
    """``sglang==0.5.23/sglang/srt/...`` for a file of a cached release; the path as given otherwise."""
    root = releases_dir()
    try:
        relative = path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return str(path)
    head, *rest = relative.parts
    engine, _, version = head.partition("-")
    return f"{engine}=={version}/{'/'.join(rest)}" if rest and engine in MEMBERS else str(path)
