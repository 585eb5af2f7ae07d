"""The names of the replacement methods, read from their records
(:mod:`galinear.compress.methods.records`): the methods in order, the closed-form counterparts, the
report names and the size knobs.
"""
from __future__ import annotations

from galinear.compress.methods.records import RECORDS, base_name, display_name, sized_families

METHODS = tuple(RECORDS)
#: Adam-fitted name -> closed-form name
CLOSED_FORM = {m.name: m.closed_form for m in RECORDS.values() if m.closed_form}
DISPLAY = {m.name: m.display for m in RECORDS.values() if m.display}
#: the knob of each family whose size is a setting (galinear.compress.methods.budgets); its MethodSpec field
KNOBS = sized_families()

__all__ = ["METHODS", "CLOSED_FORM", "DISPLAY", "KNOBS", "base_name", "display_name"]
