"""CDK entry point: `cdk synth -c config=cluster_config/examples/minimal.yaml` (default: that file).

Loads and validates the YAML once; a bad config prints one line per problem and exits 2, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk

from cluster_config import ConfigInvalid, load
from stacks.app_builder import DEFAULT_CONFIG, add_stacks


def main() -> int:
    """Build and synthesize the app for the `config` context value."""
    app = cdk.App()
    path = Path(str(app.node.try_get_context("config") or DEFAULT_CONFIG))
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
