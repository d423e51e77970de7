"""The CDK app: `cdk deploy --all -c config=my-cluster.yaml` (or `cdk synth -c config=...`).

Run as `python -m stacks.cdk_app` (what `elastic-slurm synth` passes the CDK CLI as --app, from a checkout or a
pip-installed package alike) or through the checkout's app.py (cdk.json's app, for `npx cdk` users). cdk.json's
context (stacks/project.py: the checkout's, or the package's copy) is the app's default context; context the CLI
passes (its cdk.json, -c) wins.

There is no default config: without `-c config=` the app prints one line naming the option and exits 2, so a
forgotten option never deploys an example. Loads and validates the YAML once; a bad config prints one line per
problem and exits 2, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk

from cluster_config import ConfigInvalid, load
from stacks.app_builder import add_stacks
from stacks.project import cdk_context

MISSING_CONFIG = (
    "cdk app: no cluster config given: pass -c config=PATH to cdk "
    "(e.g. `cdk deploy --all -c config=cluster_config/examples/minimal.yaml`, or run `elastic-slurm synth FILE`)"
)


def main() -> int:
    """Build and synthesize the app for the `config` context value."""
    app = cdk.App(context=cdk_context())
    config_path = app.node.try_get_context("config")
    if not config_path:
        print(MISSING_CONFIG, file=sys.stderr)
        return 2
    path = Path(str(config_path))
    try:
        config = load(path)
    except ConfigInvalid as exc:
        for error in exc.errors:
            print(f"{exc.source}: {error}", file=sys.stderr)
        return 2
    add_stacks(app, config, path)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
