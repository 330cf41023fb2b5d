"""An arch as a user writes it, read to the one spelling artune's tables use.

A CUDA arch is its compute capability, ``major.minor`` (``10.7``); users also
write it as CUDA's compilers do (``sm_107``, ``sm107``, ``sm_100a``,
``compute_90``), and all of those read to the same arch. An AMD arch is its gfx
name (``gfx942``; torch's ``gcnArchName`` target features dropped), and the
capability torch reports on ROCm (``9.4``) reads as that gfx arch where NVIDIA
reports no such number (``artune.rocm``). An arch artune knows nothing of is
an error listing the known ones, never a silent default: an engine decides
differently on an arch it has no row for, so a typo would change the answer.
"""

from __future__ import annotations

import re

from artune import rocm
from artune.errors import ArtuneError

#: every NVIDIA compute capability artune reads, with the GPUs that report it (NVIDIA's CUDA GPU list;
#: 10.7 is Rubin, as the engines' tables name it)
CUDA_ARCHS: dict[str, str] = {
    "7.0": "Tesla V100",
    "7.5": "T4, RTX 20",
    "8.0": "A100, A30",
    "8.6": "A10, A40, RTX 30",
    "8.7": "Jetson Orin",
    "8.9": "L4, L40, RTX 40",
    "9.0": "H100, H200, GH200",
    "10.0": "B200, GB200",
    "10.3": "B300, GB300",
    "10.7": "Rubin",
    "11.0": "Jetson Thor",
    "12.0": "RTX PRO 6000, RTX 50",
    "12.1": "DGX Spark (GB10)",
}

# sm_107, sm107, sm_100a, compute_90, SM_90: CUDA's spelling is major and minor run together, minor one digit
_SM = re.compile(r"(?:sm|compute)_?(\d+?)(\d)[af]?", re.IGNORECASE)
_NUMBER = re.compile(r"(\d+)\.(\d+)")


def known() -> list[str]:
    """Every arch artune knows, CUDA's capabilities then AMD's gfx archs."""
    return [*CUDA_ARCHS, *rocm.archs()]


def parse_arch(text: str) -> str:
    """The arch ``text`` names, as tables key it: ``10.7`` for ``10.7``, ``sm_107``, ``sm107`` or ``sm_107a``;
    ``gfx942`` for ``gfx942``, ``gfx942:sramecc+:xnack-`` or ``9.4`` (what torch on ROCm reports for it; ``9.0``
    is Hopper, as NVIDIA's number wins where both report one). ``ArtuneError`` listing the known archs for an
    arch artune does not know."""
    spelled = text.strip()
    if rocm.is_gfx(spelled):
        gfx = rocm.gfx_arch(spelled)
        if gfx is not None and gfx in rocm.archs():
            return gfx
    elif sm := _SM.fullmatch(spelled):
        arch = f"{int(sm[1])}.{sm[2]}"
        if arch in CUDA_ARCHS:
            return arch
    elif number := _NUMBER.fullmatch(spelled):
        arch = f"{int(number[1])}.{int(number[2])}"
        if arch in CUDA_ARCHS:
            return arch
        gfx = rocm.gfx_arch(arch)  # a number only torch on ROCm reports (9.4): its gfx arch
        if gfx is not None:
            return gfx
    raise ArtuneError(
        f"unknown arch {text!r}; artune knows CUDA {', '.join(CUDA_ARCHS)} (also written sm_107 for 10.7) and AMD "
        f"{', '.join(rocm.archs())} (torch on ROCm reports "
        f"{', '.join(a.capability for a in rocm.archs().values())} for them)"
    )
