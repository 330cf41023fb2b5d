"""Builds the compiled shared-memory round (project metadata lives in pyproject.toml).

When the C compiler is missing or fails, the install goes on without it and
artune runs the pure-Python round (``artune.algorithms.shm.native`` says
which one runs); set ``ARTUNE_REQUIRE_NATIVE=1`` to make such a failure fatal.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing, unless ARTUNE_REQUIRE_NATIVE=1."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as err:  # no compiler at all (setuptools' CompileError, PlatformError, ...)
            self._give_up(err)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as err:
            self._give_up(err)

    def _give_up(self, err: Exception) -> None:
        if os.environ.get("ARTUNE_REQUIRE_NATIVE") == "1":
            raise err
        print(
            f"WARNING: artune's compiled shared-memory round was not built ({err}); "
            "the pure-Python round will run instead",
            file=sys.stderr,
        )


setup(
    ext_modules=[
        Extension(
            "artune.algorithms.shm._native",
            sources=["src/artune/algorithms/shm/_native.c", "src/artune/algorithms/shm/reduce.c"],
            depends=["src/artune/algorithms/shm/reduce.h"],
            # -O3 for the vectorised reductions; no fast-math: results must match torch's bit for bit
            extra_compile_args=[
                "-O3",
                "-std=gnu11",
                "-fno-fast-math",
                "-ffp-contract=off",
                "-fno-trapping-math",
                "-Wall",
                "-fvisibility=hidden",  # only PyInit__native is the module's to export
            ],
            libraries=["pthread"],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
