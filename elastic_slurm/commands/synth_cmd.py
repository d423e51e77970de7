"""`elastic-slurm synth FILE [--out DIR]`: validate the config, then run the real CDK CLI on it.

Runs `node_modules/.bin/cdk synth -c config=FILE -o DIR` from the repository root (where cdk.json is), so the
templates are exactly what `cdk deploy` would deploy. No AWS account is needed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Any

from cluster_config import load
from elastic_slurm.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"


def register(sub: Any) -> None:
    """Add the `synth` subcommand."""
    parser = sub.add_parser("synth", help="synthesize the CloudFormation templates of a cluster YAML (offline)")
    parser.add_argument("file", metavar="FILE", help="cluster YAML file")
    parser.add_argument("--out", metavar="DIR", default="cdk.out", help="cloud assembly directory (default: cdk.out)")
    parser.set_defaults(func=run_synth)


def synth_command(config: Path, out: Path) -> list[str]:
    """The CDK CLI command line for `config` → `out` (absolute paths: the CLI runs from the repository root)."""
    return [str(CDK_CLI), "synth", "--quiet", "-c", f"config={config.resolve()}", "-o", str(out.resolve())]


def synth_env(base: dict[str, str]) -> dict[str, str]:
    """Environment for an offline synth: no instance-metadata credential probing, no node deprecation banners."""
    env = dict(base)
    # node_modules/.bin first: the CDK CLI and jsii run on the Node 22 LTS package.json pins, not the system node.
    env["PATH"] = os.pathsep.join([str(CDK_CLI.parent), *filter(None, [base.get("PATH")])])
    env.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    return env


def run_synth(args: argparse.Namespace) -> int:
    """Validate FILE (ConfigInvalid → one line per problem, exit 2), then synthesize; returns the CLI's exit code."""
    config = Path(args.file)
    load(config)
    if not CDK_CLI.exists():
        raise UserError(f"CDK CLI not found at {CDK_CLI}; run `make setup` (npm install)")
    out = Path(args.out)
    try:
        result = subprocess.run(synth_command(config, out), cwd=REPO_ROOT, env=synth_env(dict(os.environ)), check=False)
    except OSError as exc:
        raise UserError(f"cannot run the CDK CLI: {exc.strerror}") from None
    if result.returncode == 0:
        templates = sorted(out.glob("*.template.json"))
        print(f"{args.file}: {len(templates)} template(s) in {out}")
    return result.returncode
