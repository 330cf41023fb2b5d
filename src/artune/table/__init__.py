"""Dispatch tables: the model, its TOML file, the decision, checks, families and overrides."""

from artune.table.check import Finding, check_table
from artune.table.decide import Decision
from artune.table.family import TableSet, family_chain
from artune.table.io import dump_table, dumps_table, load_table, loads_table
from artune.table.overrides import Overrides, apply_overrides, parse_overrides
from artune.table.types import Band, Plan, Platform, Provenance, Table

__all__ = [
    "Band",
    "Decision",
    "Finding",
    "Overrides",
    "Plan",
    "Platform",
    "Provenance",
    "Table",
    "TableSet",
    "apply_overrides",
    "check_table",
    "dump_table",
    "dumps_table",
    "family_chain",
    "load_table",
    "loads_table",
    "parse_overrides",
]
