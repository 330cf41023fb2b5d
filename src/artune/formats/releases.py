"""The engines' released wheels, as a table source: ``vllm==0.33.0``, ``sglang==0.5.23``.

A release is what users run, so it is what artune must read: ``artune check
sglang==0.5.23`` downloads the wheel from the package registry once
(``pip download --no-deps``), keeps only the files that hold the engine's
all-reduce dispatch (its ``EnginePlugin.wheel``), and reads them as it reads a checkout.
Nothing from the wheel is run. The unpacked files are cached under
``$ARTUNE_RELEASES_DIR``, by default ``releases`` in artune's cache (``artune.settings.cache_root``:
``$ARTUNE_CACHE_DIR``, ``$XDG_CACHE_HOME/artune``, ``~/.cache/artune``); naming the releases' folder apart lets
tests with a private cache share one download of each release.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from artune.errors import ReleaseUnavailable, TableError
from artune.formats.cache import STAMP, VERSION, releases_dir

#: packages an engine's oracle runs beside its release, which are no table source: name -> the wheel's files
#: artune reads (an engine's own are its ``EnginePlugin.wheel``). FlashInfer's MNNVL all-reduce workspace is
#: the one vLLM's FlashInfer path asks whether a call fits (is_buffer_size_sufficient): the vLLM oracle runs it
COMPANIONS: dict[str, tuple[str, ...]] = {
    "flashinfer-python": (
        "flashinfer/comm/trtllm_mnnvl_ar.py",
        "flashinfer/comm/workspace_base.py",
        "flashinfer/comm/mnnvl.py",
    ),
}
DOWNLOAD_TIMEOUT_S = 900


def members(name: str) -> tuple[str, ...]:
    """The wheel's files artune reads of package ``name`` (an engine's release, or a companion's); () where it
    reads none."""
    from artune.formats.registry import engine, names

    if name in COMPANIONS:
        return COMPANIONS[name]
    return engine(name).wheel if name in names() else ()


def release_spec(spec: str) -> tuple[str, str] | None:
    """``("sglang", "0.5.23")`` for ``"sglang==0.5.23"``; ``None`` for any other table name."""
    engine, sep, version = spec.partition("==")
    if not sep or engine in COMPANIONS or not members(engine):
        return None
    if not VERSION.match(version):
        raise TableError(f"{spec}: {version!r} is not a release version; give one such as {engine}==0.5.23")
    return engine, version


def fetch_release(engine: str, version: str) -> Path:
    """The folder holding ``engine==version``'s dispatch files, downloading and unpacking it the first time.

    ``ReleaseUnavailable`` names the release and pip's reason when it cannot
    be downloaded. The folder is filled in a temporary sibling and renamed
    into place, so a download cut short leaves nothing that looks complete.
    """
    wanted = members(engine)
    if not wanted:
        from artune.formats.registry import engines

        known = [*(e.name for e in engines("read") if e.wheel), *COMPANIONS]
        raise TableError(f"{engine}: no released wheels known; known: {', '.join(known)}")
    target = releases_dir() / f"{engine}-{version}"
    stamp = "\n".join(wanted) + "\n"  # a copy made for fewer members is made again
    if target.is_dir() and _read(target / STAMP) == stamp:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{engine}-{version}-", dir=target.parent) as work:
        wheel = _download(engine, version, Path(work) / "wheel")
        unpacked = Path(work) / "files"
        _unpack(wheel, wanted, unpacked)
        (unpacked / "WHEEL").write_text(wheel.name + "\n")
        (unpacked / STAMP).write_text(stamp)
        if target.is_dir() and _read(target / STAMP) == stamp:
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
