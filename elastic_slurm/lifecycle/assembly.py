"""The stacks of a synthesized cloud assembly (`cdk synth -o DIR`): name, environment and resource count of each, in
the order manifest.json lists them (CDK writes dependencies first)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from elastic_slurm.errors import UserError


@dataclass(frozen=True)
class SynthesizedStack:
    """One stack `cdk deploy` would create."""

    name: str
    environment: str  # aws://ACCOUNT/REGION
    resources: int

    @property
    def region(self) -> str:
        """The stack's region (the last part of its environment)."""
        return self.environment.rsplit("/", 1)[-1]


def stacks_of(outdir: Path) -> list[SynthesizedStack]:
    """The CloudFormation stacks of the assembly in `outdir`."""
    try:
        manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{outdir}: no readable cloud assembly manifest ({exc})") from None
    out = []
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        template = json.loads((outdir / artifact["properties"]["templateFile"]).read_text(encoding="utf-8"))
        out.append(SynthesizedStack(name, str(artifact.get("environment", "")), len(template.get("Resources", {}))))
    return out
