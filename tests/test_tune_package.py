"""``artune.tune``'s own account of itself: the module list in its docstring names the modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

import artune.tune


def _listed(doc: str) -> set[str]:
    """The names in ``doc``'s paragraph that begins with ``Modules:``, each the first ``name`` of an item."""
    paragraph = next(p for p in doc.split("\n\n") if p.startswith("Modules:"))
    return set(re.findall(r"``(\w+)``", paragraph))


def test_the_module_list_names_every_module_and_no_other() -> None:
    assert artune.tune.__file__ is not None
    here = {p.stem for p in Path(artune.tune.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert artune.tune.__doc__ is not None
    listed = _listed(artune.tune.__doc__)
    assert listed == here, f"listed but missing: {sorted(listed - here)}; not listed: {sorted(here - listed)}"


def test_the_list_reader_sees_a_module_that_is_not_there() -> None:
    doc = "How.\n\nModules: ``compare`` (one rule), ``build`` (gone),\n``duel``.\n\nThe end names ``tuner``."
    assert _listed(doc) == {"compare", "build", "duel"}
