"""Slurm's own syntax for values the config passes straight into slurm.conf: time limits and feature names.

The model uses these for single-field rules, so a value slurmctld would refuse at start-up (or read differently than
meant) fails `elastic-slurm validate` with the field's path instead.
"""

from __future__ import annotations

import re

# Slurm time limits (sbatch --time, partition MaxTime): the words for "no limit" (any case, as Slurm compares them),
# then minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds.
# 0 is a valid limit of zero minutes.
TIME_WORDS = frozenset({"INFINITE", "UNLIMITED"})
_TIME = re.compile(r"[0-9]+(-[0-9]+)?(:[0-9]+){0,2}")
TIME_FORMS = (
    "INFINITE, UNLIMITED, minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes or "
    "days-hours:minutes:seconds"
)

# Feature names (node features, federation cluster features): Slurm splits lists on ',' and constraint expressions
# on & | [ ] ( ) * : and blanks, so a name is letters, digits, '_', '.' and '-' only.
FEATURE_PATTERN = r"^[A-Za-z0-9_.-]+$"


def time_limit(value: str) -> str:
    """Return `value` if Slurm reads it as a time limit, else raise ValueError naming the allowed forms."""
    if value.upper() in TIME_WORDS or _TIME.fullmatch(value):
        return value
    raise ValueError(f"'{value}' is not a Slurm time limit; use {TIME_FORMS}")
