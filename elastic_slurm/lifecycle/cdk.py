"""The CDK CLI command lines of `cluster create/update/delete`, and running one with its output streaming through.

Built with synth_cmd's helpers, like `elastic-slurm synth`: the CLI found by `cdk_cli()`, this installation's app
(`--app`), run from `cdk_workdir()` (where its cdk.json is) — but with instance metadata left on: a deploy from an
EC2 instance takes its credentials from there.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from elastic_slurm.commands.synth_cmd import cdk_command, cdk_workdir, check_toolchain, synth_env
from elastic_slurm.errors import UserError


def deploy_command(config: Path, yes: bool = False) -> list[str]:
    """`cdk deploy` of every stack of the config. CDK asks before deploying a change that broadens security (IAM
    statements, security group rules: `--require-approval broadening`), and refuses it without a terminal to ask on;
    `yes` (the operator's `--yes`) approves them up front (`never`)."""
    approval = "never" if yes else "broadening"
    return cdk_command("deploy", "--all", "-c", f"config={config.resolve()}", "--require-approval", approval)


def diff_command(config: Path) -> list[str]:
    """`cdk diff` of every stack of the config against what is deployed (templates, IAM and security group changes)."""
    return cdk_command("diff", "--all", "-c", f"config={config.resolve()}")


def destroy_command(config: Path) -> list[str]:
    """`cdk destroy` of every stack of the config, without CDK's confirmation prompt."""
    return cdk_command("destroy", "--all", "--force", "-c", f"config={config.resolve()}")


def cdk_env(base: dict[str, str]) -> dict[str, str]:
    """synth_env without its instance-metadata switch (unless the caller had set it)."""
    env = synth_env(base)
    if "AWS_EC2_METADATA_DISABLED" not in base:
        env.pop("AWS_EC2_METADATA_DISABLED", None)
    return env


def run_cdk(command: list[str]) -> int:
    """Run a CDK CLI command; its progress output streams through; its exit code. The cloud assembly goes to a
    temporary directory (`-o`): the working directory may be the installed package, which is not the user's to write."""
    try:
        with tempfile.TemporaryDirectory(prefix="elastic-slurm-cdk-") as out:
            full = [*command, "-o", out]
            env = cdk_env(dict(os.environ))
            check_toolchain(env)
            return subprocess.run(full, cwd=cdk_workdir(), env=env, check=False).returncode
    except OSError as exc:
        raise UserError(f"cannot run the CDK CLI: {exc.strerror}") from None
