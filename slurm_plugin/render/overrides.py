"""Machine overrides for the production render commands: the paths, ports and timers that differ where they run.

On EC2 nothing sets `ES_RENDER_OVERRIDES`, and `elastic-slurm render --controller-hosts ...` and
`elastic-slurm render-slurmdbd` (both run by the controller's user data, stacks/user_data.py) write the production
files. The local cloud runs that same user data on its controller and sets the variable (through the user data's env
file) to a JSON file naming what must differ on a machine that hosts many nodes and clusters at once — ports, paths
under its state directory, no cgroup plugins, shorter Slurm timers; docs/local-cloud.md lists each with its reason:

    {"options": {RenderOptions field: value}, "base": {BaseSettings field: value}, "dbd": {DbdPaths field: value}}
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from slurm_plugin.render.manifest import RenderError

ENV_VAR = "ES_RENDER_OVERRIDES"
SECTIONS = ("options", "base", "dbd")
T = TypeVar("T")


def load(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The overrides named by $ES_RENDER_OVERRIDES ({} per section when unset); RenderError (one line) otherwise."""
    path = (os.environ if environ is None else environ).get(ENV_VAR, "")
    empty: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    if not path:
        return empty
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise RenderError(f"{ENV_VAR}: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise RenderError(f"{ENV_VAR}: {path} is not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or any(not isinstance(data.get(s, {}), dict) for s in SECTIONS):
        raise RenderError(f"{ENV_VAR}: {path}: expected an object with objects {', '.join(SECTIONS)}")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise RenderError(f"{ENV_VAR}: {path}: unknown section '{unknown[0]}' (known: {', '.join(SECTIONS)})")
    return {section: dict(data.get(section, {})) for section in SECTIONS}


def apply(instance: T, values: Mapping[str, Any], section: str) -> T:
    """`instance` (a dataclass) with `values` replaced; lists become tuples; RenderError naming an unknown field."""
    fields = {f.name for f in dataclasses.fields(instance)}  # type: ignore[arg-type]
    for key in values:
        if key not in fields:
            raise RenderError(f"{ENV_VAR}: {section}.{key} is not a setting (known: {', '.join(sorted(fields))})")
    converted = {
        k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
        for k, v in values.items()
    }
    return dataclasses.replace(instance, **converted)  # type: ignore[type-var]
