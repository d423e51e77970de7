"""Command-line values checked before use, with errors that stay one line: a value is echoed escaped (`repr`: a
newline shows as `\\n`) and cut at 80 characters; a path the OS refuses (too long, a NUL byte) is "not a file", never
an OSError traceback."""

from __future__ import annotations

import re
from pathlib import Path

from cluster_config.model import CLUSTER_NAME_PATTERN, Cluster
from elastic_slurm.errors import UserError

ECHO_LIMIT = 80
PATH_ECHO_LIMIT = 1024  # a printable path up to this long is named as it is
# the config's own bound on `clusters[].name` (32)
NAME_MAX = next(int(m.max_length) for m in Cluster.model_fields["name"].metadata if hasattr(m, "max_length"))


def shown(value: str) -> str:
    """The value as an error line names it: escaped, at most ECHO_LIMIT characters of it."""
    cut = value[:ECHO_LIMIT]
    return repr(cut) + (f" (cut at {ECHO_LIMIT} of {len(value)} characters)" if len(value) > ECHO_LIMIT else "")


def is_file(text: str) -> bool:
    """Whether `text` names a regular file (False for what the OS refuses as a path)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def is_cluster_name(text: str) -> bool:
    """Whether `text` is a cluster name (the config's pattern, matched whole: no trailing newline, and its length)."""
    return len(text) <= NAME_MAX and re.fullmatch(CLUSTER_NAME_PATTERN, text) is not None


def cluster_name(text: str, argument: str = "NAME") -> str:
    """`text` when it is a cluster name, else UserError naming `argument`."""
    if not is_cluster_name(text):
        raise UserError(f"{argument}: {shown(text)} is not a cluster name (lowercase letters, digits and '-')")
    return text
