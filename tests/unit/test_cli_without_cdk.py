"""The `elastic-slurm` CLI as cluster nodes have it: the images install cluster_config, elastic_slurm and slurm_plugin
but not the CDK app (`stacks`, aws_cdk; stacks/image_source.py), and the controllers' config apply runs
`elastic-slurm instance-cache refresh` and `render`. Every command module must import without them."""

from __future__ import annotations

import json
import subprocess
import sys

from stacks.image_source import PROJECT_SOURCE

BLOCKED = ("stacks", "aws_cdk", "constructs", "cdk_nag")
PROGRAM = f"""
import json, sys
class NotOnNodes:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is not installed on cluster nodes")
        return None
sys.meta_path.insert(0, NotOnNodes())
from elastic_slurm.cli import build_parser
parser = build_parser()
print(json.dumps(sorted(parser._subparsers._group_actions[0].choices)))
"""


def test_every_command_imports_without_the_cdk_app() -> None:
    assert "stacks" not in PROJECT_SOURCE  # what the test stands for: the image's package list
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    commands = set(json.loads(result.stdout))
    assert {"validate", "render", "instance-cache", "cluster", "connect", "logs", "configure"} <= commands
