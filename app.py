"""CDK entry point of a checkout (cdk.json's app): `npx cdk deploy --all -c config=my-cluster.yaml`.

The app itself is stacks/cdk_app.py, which a pip-installed package runs as `python -m stacks.cdk_app`.
"""

from __future__ import annotations

import sys

from stacks.cdk_app import main

if __name__ == "__main__":
    sys.exit(main())
