"""Where the engines' released files are cached, and how a file read from there is named.

A leaf below the readers (``artune.formats.files`` names every file it reads
with ``display_path``) and the downloads (``artune.formats.releases`` fills
the folders), so that naming a file asks nothing of the engines' registry.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from artune.settings import cache_root

#: a release's version as pip takes it: it starts with a digit (so a package's name, which may hold a "-", ends
#: at the last "-" before one)
VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!-]*$")
#: the file ``fetch_release`` writes last in a release's folder: the wheel's members it kept
STAMP = "MEMBERS"


def releases_dir() -> Path:
    """Where unpacked releases are cached (``ARTUNE_RELEASES_DIR``, default ``releases`` in the cache root,
    ``artune.settings.cache_root``)."""
    return Path(os.environ.get("ARTUNE_RELEASES_DIR") or cache_root() / "releases")


def display_path(path: Path) -> str:
    """``sglang==0.5.23/sglang/srt/...`` for a file of a cached release; the path as given otherwise."""
    root = releases_dir()
    try:
        relative = path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return str(path)
    head, *rest = relative.parts
    package, _, version = head.partition("-")
    # a companion package (flashinfer-python) reads as no release: its name's "-" leaves no version after it
    release = rest and VERSION.match(version) and (root / head / STAMP).is_file()
    return f"{package}=={version}/{'/'.join(rest)}" if release else str(path)
