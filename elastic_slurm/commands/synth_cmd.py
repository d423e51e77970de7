"""`elastic-slurm synth FILE [--out DIR]`: validate the config, then run the real CDK CLI on it.

Runs `cdk synth --app "<this Python> -m stacks.cdk_app" -c config=FILE -o DIR`, so the templates are exactly what
`cdk deploy` would deploy. No AWS account is needed, and neither is a checkout: the same works from a pip-installed
package. The helpers below are shared with `elastic-slurm cluster create|update|delete`:

- `cdk_cli()`: the CDK CLI — $ELASTIC_SLURM_CDK, else the checkout's node_modules/.bin/cdk (`make setup`), else `cdk`
  on PATH, else `npx --yes aws-cdk@<package.json's pin>` (exactly that version, never an unpinned one; the first run
  downloads it, and says so on stderr); none of them is a UserError naming what to install.
- `check_toolchain(env)`: before the CLI runs, the Node.js it runs on (the first `node` on the synth environment's
  PATH) must be >= 22 (NODE_MAJOR): else one line naming the version found and the fix, instead of Node's banner.
  `CDK_CLI` is the CLI file found when this module was imported (the checkout's path when there is none).
- `cdk_command(*args)`: `[*cdk_cli(), *args, "--app", <the app>]`, runnable from any working directory;
  `synth_command(config, out)` is the synth one.
- `cdk_workdir()`: the directory whose cdk.json (the app's context) the CLI reads: the checkout's root, or a
  pip-installed package's copy (stacks/project.py).
- `synth_env(base)`: the environment for an offline synth.

`stacks` (the CDK app, not installed on cluster nodes) is imported only when a command needs it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cluster_config import load
from elastic_slurm.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout's root, when running from one
CHECKOUT_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"
CDK_ENV = "ELASTIC_SLURM_CDK"
APP_MODULE = "stacks.cdk_app"
NODE_MAJOR = 22  # the CDK CLI and jsii run on an LTS >= 22 (package.json pins the Node 22 LTS for a checkout)


def _cli_file(environ: Mapping[str, str]) -> Path | None:
    """The CDK CLI executable of $ELASTIC_SLURM_CDK, the checkout or PATH (None: none of them)."""
    path = environ.get("PATH")
    override = environ.get(CDK_ENV)
    if override:
        found = shutil.which(override, path=path)
        return Path(found) if found else None
    if CHECKOUT_CLI.exists():
        return CHECKOUT_CLI
    on_path = shutil.which("cdk", path=path)
    return Path(on_path) if on_path else None


CDK_CLI = _cli_file(os.environ) or CHECKOUT_CLI


def cdk_cli_version() -> str:
    """The CDK CLI version package.json pins (the checkout's, or a pip-installed package's copy)."""
    from stacks.project import cdk_cli_version as pinned  # here: stacks is not installed on cluster nodes

    return pinned()


def cdk_cli(environ: Mapping[str, str] | None = None) -> list[str]:
    """The command that runs the CDK CLI (see the module docstring); UserError when there is none."""
    env = os.environ if environ is None else environ
    override = env.get(CDK_ENV)
    found = _cli_file(env)
    if found is not None:
        return [str(found)]
    if override:
        raise UserError(f"{CDK_ENV}={override}: no such executable (point it at a `cdk` CLI, or unset it)")
    npx = shutil.which("npx", path=env.get("PATH"))
    if npx is not None:
        pinned = cdk_cli_version()
        print(
            f"elastic-slurm: no CDK CLI installed: running the pinned aws-cdk@{pinned} through npx (it downloads it "
            f"once; install it to skip this: npm install -g aws-cdk@{pinned})",
            file=sys.stderr,
        )
        return [npx, "--yes", f"aws-cdk@{pinned}"]
    raise UserError(
        "no AWS CDK CLI found: install Node.js >= 22 (its npx then runs the pinned CDK CLI), "
        f"or `npm install -g aws-cdk@{cdk_cli_version()}`, or set {CDK_ENV} to a cdk executable"
    )


def node_version(env: Mapping[str, str]) -> tuple[str, int]:
    """(path, major version) of the `node` the CDK CLI would run on: the first on env's PATH; UserError when there is
    none or it cannot tell its version."""
    node = shutil.which("node", path=env.get("PATH"))
    if node is None:
        raise UserError(f"no Node.js found on PATH: the CDK CLI needs Node.js >= {NODE_MAJOR} (install an LTS release)")
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{node} --version: {exc}") from None
    text = out.strip()
    try:
        return node, int(text.lstrip("v").split(".")[0])
    except ValueError:
        raise UserError(f"{node} --version printed {text[:40]!r}, not a Node.js version") from None


def check_toolchain(env: Mapping[str, str]) -> None:
    """One line (UserError) when the Node.js the CDK CLI would run on is older than NODE_MAJOR."""
    node, major = node_version(env)
    if major < NODE_MAJOR:
        raise UserError(
            f"Node.js {major} at {node} is too old: the CDK CLI needs Node.js >= {NODE_MAJOR}; install a Node.js "
            f"{NODE_MAJOR} LTS and put it first on PATH (a checkout: `make setup` puts it in node_modules/.bin)"
        )


def cdk_app_command() -> str:
    """The --app command line: this Python runs the CDK app of this installation."""
    return shlex.join([sys.executable, "-m", APP_MODULE])


def cdk_workdir() -> Path:
    """The CLI's working directory: the one holding the cdk.json of this installation (see the module docstring)."""
    from stacks.project import PROJECT_DIR  # here: stacks is not installed on cluster nodes

    return PROJECT_DIR


# The CDK app's libraries: the `cdk` extra (pyproject.toml), not installed on cluster nodes.
CDK_APP_MODULES = ("aws_cdk", "constructs", "cdk_nag")


def require_cdk_app() -> None:
    """One line (UserError) when this installation lacks the CDK app's libraries."""
    missing = [name for name in CDK_APP_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(
            f"the CDK app needs {', '.join(missing)}: install elastic-slurm with its cdk extra "
            "(the package is not on PyPI: `pip install 'WHEEL[cdk]'` with a wheel built from a checkout, or "
            "`pip install 'CHECKOUT[cdk]'`; docs/deploy.md, Prerequisites)"
        )


def cdk_command(*args: str) -> list[str]:
    """A CDK CLI command line running this installation's app, e.g. `cdk_command("deploy", "--all", "-c", ...)`."""
    require_cdk_app()
    return [*cdk_cli(), *args, "--app", cdk_app_command()]


def register(sub: Any) -> None:
    """Add the `synth` subcommand."""
    parser = sub.add_parser("synth", help="synthesize the CloudFormation templates of a cluster YAML (offline)")
    parser.add_argument("file", metavar="FILE", help="cluster YAML file")
    parser.add_argument("--out", metavar="DIR", default="cdk.out", help="cloud assembly directory (default: cdk.out)")
    parser.set_defaults(func=run_synth)


def synth_command(config: Path, out: Path) -> list[str]:
    """The CDK CLI command line for `config` → `out` (absolute paths: the CLI runs from `cdk_workdir()`)."""
    return cdk_command("synth", "--quiet", "-c", f"config={config.resolve()}", "-o", str(out.resolve()))


def synth_env(base: dict[str, str]) -> dict[str, str]:
    """Environment for an offline synth: no instance-metadata credential probing, no node deprecation banners."""
    env = dict(base)
    cli = _cli_file(base)
    if cli is not None and (cli.parent / "node").exists():
        # node_modules/.bin first: the CDK CLI and jsii run on the Node 22 LTS package.json pins, not the system node.
        env["PATH"] = os.pathsep.join([str(cli.parent), *filter(None, [base.get("PATH")])])
    env.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    env.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    return env


def run_synth(args: argparse.Namespace) -> int:
    """Validate FILE (ConfigInvalid → one line per problem, exit 3), then synthesize; returns the CLI's exit code."""
    config = Path(args.file)
    load(config)
    out = Path(args.out)
    command = synth_command(config, out)
    env = synth_env(dict(os.environ))
    check_toolchain(env)
    try:
        result = subprocess.run(command, cwd=cdk_workdir(), env=env, check=False)
    except OSError as exc:
        raise UserError(f"cannot run the CDK CLI: {exc.strerror}") from None
    if result.returncode == 0:
        templates = sorted(out.glob("*.template.json"))
        print(f"{args.file}: {len(templates)} template(s) in {out}")
    return result.returncode
