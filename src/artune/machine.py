"""This machine's identity: its platform and a fingerprint that keys its measured table.

Two machines with the same fingerprint are expected to measure alike (same
CPU model, core count and memory size); a measured table is cached under the
fingerprint and a measurement log refuses to mix fingerprints.
"""

from __future__ import annotations

import hashlib
import math
import os
import platform as _platform
import socket
from functools import cache

from artune.platforms import Platform


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith(("model name", "cpu model", "hardware")):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def _memory_gib() -> int:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30))
    except (ValueError, OSError):
        return 0


@cache
def cpu_platform() -> Platform:
    """This host as a CPU platform: arch = ``platform.machine()``, device = the CPU model."""
    return Platform(kind="cpu", arch=_platform.machine() or "unknown", device=_cpu_model())


@cache
def fingerprint() -> str:
    """A short stable hash of what makes this machine's figures what they are."""
    plat = cpu_platform()
    text = f"{plat.kind}|{plat.arch}|{plat.device}|cpus={os.cpu_count()}|mem={_memory_gib()}GiB"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


#: for tests and experiments only: this process acts as if it ran on its own host of this name
HOST_OVERRIDE_ENV = "ARTUNE_HOST"


def host_id() -> str:
    """Identifies the running OS instance: ranks with equal ids can share /dev/shm (if mounted alike).

    For tests and experiments, ``ARTUNE_HOST=<name>`` makes this process act
    as if it ran on a host of that name: ranks with different names never
    share memory, so 4 local ranks set to ``a, a, b, b`` behave as 2 hosts x 2
    ranks (read at each call, so a spawned rank may set it before it builds
    a Communicator). Not meant for production: real hosts need no override.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as boot:
            boot_id = boot.read().strip()
    except OSError:
        boot_id = ""
    simulated = os.environ.get(HOST_OVERRIDE_ENV, "")
    return f"{socket.gethostname()}|{boot_id}" + (f"|simulated:{simulated}" if simulated else "")


def host_label(host: str) -> str:
    """A short name for a ``host_id`` in messages: the hostname, plus the simulated name if any."""
    name, _, rest = host.partition("|")
    return name + (f"/{rest.rpartition('simulated:')[2]}" if "simulated:" in rest else "")


def cpu_times() -> list[int]:
    """The machine's CPU time counters (/proc/stat's first line, in ticks; [] where there is none)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            return [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return []


def steal_share(before: list[int], after: list[int]) -> float:
    """The share of CPU time the hypervisor took from this VM between two ``cpu_times`` readings (its 8th
    counter; NaN where unknown): while the host runs other guests on our cores, a run is not a quiet one,
    whatever the load average says."""
    if len(before) < 8 or len(after) < 8:
        return math.nan
    total = sum(after) - sum(before)
    return (after[7] - before[7]) / total if total > 0 else math.nan
