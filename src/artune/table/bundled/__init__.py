"""Tables that ship with artune: the defaults used before a machine is measured."""

from __future__ import annotations

from functools import cache
from importlib import resources

from artune.table.family import conservative_default
from artune.table.io import loads_table
from artune.table.types import Platform, Table


@cache
def cpu_default() -> Table:
    """The CPU default (DeepSpeed's 1 MiB one-shot/two-shot rule), origin ``bundled:cpu``."""
    text = resources.files(__package__).joinpath("cpu.toml").read_text(encoding="utf-8")
    return loads_table(text, origin="bundled:cpu")


def default_table(platform: Platform) -> Table:
    """The bundled default for a platform: the CPU rule on CPUs, the process group elsewhere."""
    if platform.kind == "cpu":
        return cpu_default()
    return conservative_default(platform)
