"""Every AWS API call the product makes on a node or in a Lambda, extracted from the code (pure; no hand-kept list).

- Python: boto3 client calls found with `ast` in slurm_plugin/ and lambdas/ — receivers made by `*.client("svc")`,
  by a function that makes such clients (`Ec2.client(region)`, `client_factory(...)("ec2", region)`), named after
  their service (`ec2`, `ssm`) or calling an operation only one of the services the code makes clients for has;
  `get_paginator("describe_instances")` counts as that operation. A call whose service stays ambiguous is reported
  (`AwsCall.service is None`), never dropped.
- Shell: every `aws <service> <command>` in the user data of each role (rendered by stacks/user_data.py's real
  functions) and in the assets/bootstrap scripts it runs, followed transitively.

Which role runs what is derived too: the controller runs all of slurm_plugin/ (the power-save plugin, cluster
manager, exporter, license sync, bootwatch, log shipping, boot_fetch); every other node role runs the modules its
user data starts (`-m slurm_plugin.x`, console scripts of pyproject.toml) with their slurm_plugin imports; the
deconfigure Lambda runs lambdas/deconfigure/. Not scanned: elastic_slurm/ (the operator's CLI, run with the
operator's credentials, never with a role of ours) and assets/image-build/ (no `aws` command; the Image Builder
instance's role is AWS's managed policy).

Each call maps to its IAM action through botocore's service model (operation name, IAM prefix = signing name), with
the exceptions in `IAM_PREFIX`, `CLI_ACTIONS` and `OPERATION_ACTIONS`, each justified.
"""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import botocore.session
from botocore import xform_name
from botocore.model import ServiceModel

REPO = Path(__file__).resolve().parents[2]
NODE_ROLES = ("controller", "compute", "login")
# the IAM service prefix where it differs from the SigV4 signing name (Service Authorization Reference: CloudWatch's
# prefix is `cloudwatch`, its API signs as `monitoring`)
IAM_PREFIX = {"monitoring": "cloudwatch"}
# AWS CLI commands that are not one API operation: `aws s3 cp s3://... local` downloads with GetObject (our scripts
# only download; `CLI_DOWNLOAD` checks that the source is the S3 side)
CLI_ACTIONS = {("s3", "cp"): "s3:GetObject"}
# API operations authorized as another action: SQS batch operations take the single action's permission
# (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-batch-api-actions.html)
OPERATION_ACTIONS = {
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
}
_AWS_COMMAND = re.compile(r"(?:^|[\s;(|&$`])aws\s+([a-z0-9-]+)\s+([a-z0-9-]+)")


@dataclass(frozen=True)
class AwsCall:
    """One AWS API call site: botocore service name (None: ambiguous), operation (API name), where, run by whom."""

    service: str | None
    operation: str
    origin: str
    roles: frozenset[str] = frozenset()
    argv: tuple[str, ...] = ()  # a CLI call's words after `aws`

    @property
    def action(self) -> str:
        """The IAM action (`service:Operation`)."""
        if self.service is None:
            raise ValueError(f"{self.origin}: {self.operation}: service not resolved")
        if (self.service, self.operation) in CLI_ACTIONS:
            return CLI_ACTIONS[(self.service, self.operation)]
        if (self.service, self.operation) in OPERATION_ACTIONS:
            return OPERATION_ACTIONS[(self.service, self.operation)]
        return iam_action(self.service, self.operation)


@cache
def service_model(service: str) -> ServiceModel:
    """botocore's model of `service` (the same data boto3 signs requests with)."""
    return botocore.session.get_session().get_service_model(service)


@cache
def operations(service: str) -> dict[str, str]:
    """snake_case method name → API operation name of `service`."""
    return {xform_name(op): op for op in service_model(service).operation_names}


def iam_action(service: str, operation: str) -> str:
    """`prefix:Operation` for an API operation (its name in the model; prefix from the signing name)."""
    model = service_model(service)
    if operation not in model.operation_names:
        raise KeyError(f"{service} has no operation {operation}")
    signing = model.signing_name or model.endpoint_prefix
    return f"{IAM_PREFIX.get(signing, signing)}:{operation}"


# ------------------------------------------------------------------------------------------------------- Python


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _client_service(node: ast.AST) -> str | None:
    """`x.client("svc", ...)` / `boto3.client("svc")` / `factory("svc", region)` → "svc"."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("client", "_client", "factory") or name.endswith("client"):
            return _literal(node.args[0])
    return None


def _makers(tree: ast.AST) -> dict[str, set[str]]:
    """Functions whose body makes clients with a literal service: name → services."""
    result: dict[str, set[str]] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            made = {s for n in ast.walk(fn) if (s := _client_service(n))}
            if made:
                result.setdefault(fn.name, set()).update(made)
    return result


def _receiver_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def python_calls(source: str, origin: str, services: Iterable[str], makers: dict[str, set[str]]) -> list[AwsCall]:
    """Every boto3 operation call of `services` in `source` (see the module docstring for how receivers are typed)."""
    tree = ast.parse(source)
    wanted = sorted(set(services))
    by_method: dict[str, set[str]] = {}
    for name in wanted:
        for method in operations(name):
            by_method.setdefault(method, set()).add(name)
    typed: dict[str, str] = {}

    def service_of(expr: ast.AST) -> str | None:
        if (direct := _client_service(expr)) is not None:
            return direct
        if isinstance(expr, ast.Call):
            maker = makers.get(_receiver_name(expr.func), set())
            if len(maker) == 1:
                return next(iter(maker))
            if _receiver_name(expr.func) == "install" and expr.args:  # retry_policy.install(client, ...)
                return service_of(expr.args[0])
        name = _receiver_name(expr)
        return typed.get(name) or (name if name in wanted else None)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (made := service_of(node.value)):
            for target in node.targets:
                typed[_receiver_name(target)] = made
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method == "get_paginator":
            method = _literal(node.args[0] if node.args else None) or ""
        candidates = by_method.get(method)
        if not candidates:
            continue
        service = service_of(node.func.value)
        if service is None and len(candidates) == 1:
            service = next(iter(candidates))
        if service is not None and method not in operations(service):
            continue  # a same-named method of something else (e.g. a project adapter) on a typed receiver
        operation = operations(service)[method] if service else method
        calls.append(AwsCall(service, operation, f"{origin}:{node.lineno}"))
    return calls


# -------------------------------------------------------------------------------------------------------- Shell


def script_calls(text: str, origin: str) -> list[AwsCall]:
    """Every `aws <service> <command>` in a shell text (comments skipped), as API operations."""
    calls = []
    logical: list[tuple[int, str]] = []  # continuation lines (trailing backslash) joined, with the first line's number
    for number, line in enumerate(text.splitlines(), 1):
        if logical and logical[-1][1].endswith("\\"):
            logical[-1] = (logical[-1][0], logical[-1][1][:-1] + " " + line.strip())
        else:
            logical.append((number, line))
    for number, line in logical:
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for match in _AWS_COMMAND.finditer(code):
            service, command = match.groups()
            if service not in botocore.session.get_session().get_available_services():
                continue
            if (service, command) in CLI_ACTIONS:
                operation = command
            else:
                by_cli = {xform_name(op, "-"): op for op in service_model(service).operation_names}
                if command not in by_cli:
                    raise ValueError(f"{origin}:{number}: aws {service} {command} is no {service} operation")
                operation = by_cli[command]
            try:
                words = tuple(shlex.split(code[match.start() :].split("|")[0], posix=True)[1:])
            except ValueError:
                words = tuple(code[match.start() :].split()[1:])
            calls.append(AwsCall(service, operation, f"{origin}:{number}", argv=words))
    return calls


def user_data_text(role: str) -> str:
    """The user data of a node role as stacks/user_data.py renders it (values are not needed for the commands)."""
    from stacks.user_data import boot_commands

    return "\n".join(boot_commands(role, {}, signal_url="https://signal.invalid/x" if role == "controller" else None))


def scripts_run(text: str) -> list[Path]:
    """assets/bootstrap scripts a shell text runs, transitively (by file name)."""
    bootstrap = {p.name: p for p in (REPO / "assets" / "bootstrap").iterdir() if p.is_file()}
    found: list[Path] = []
    pending = [text]
    while pending:
        current = pending.pop()
        for name, path in sorted(bootstrap.items()):
            if path not in found and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", current):
                found.append(path)
                pending.append(path.read_text(encoding="utf-8"))
    return found


# ------------------------------------------------------------------------------------------------ roles → code


def _console_scripts() -> dict[str, str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {k: v.split(":")[0] for k, v in data.get("project", {}).get("scripts", {}).items()}


def _module_path(module: str) -> Path | None:
    base = REPO / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path) -> set[str]:
    """slurm_plugin modules `path` imports (absolute and relative)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m.split(".")[0] == "slurm_plugin"}


def modules_started(text: str) -> set[Path]:
    """slurm_plugin files a shell text starts (`-m module`, console scripts) with everything they import."""
    scripts = _console_scripts()
    roots = set(re.findall(r"-m\s+(slurm_plugin[\w.]*)", text))
    roots |= {module for name, module in scripts.items() if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)}
    seen: set[Path] = set()
    pending = [m for m in roots if m.startswith("slurm_plugin")]
    while pending:
        path = _module_path(pending.pop())
        if path is None or path in seen:
            continue
        seen.add(path)
        pending.extend(_imports(path))
    return seen


def _python_files(root: str) -> list[Path]:
    return sorted(p for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


def code_calls() -> list[AwsCall]:
    """Every AWS call of the product's node and Lambda code, each with the roles that run it."""
    plugin = _python_files("slurm_plugin")
    lambdas = _python_files("lambdas")
    trees = {p: p.read_text(encoding="utf-8") for p in (*plugin, *lambdas)}
    makers: dict[str, set[str]] = {}
    for source in trees.values():
        for name, made in _makers(ast.parse(source)).items():
            makers.setdefault(name, set()).update(made)
    services = {"ec2", *(s for made in makers.values() for s in made)}
    for source in trees.values():
        services |= {s for n in ast.walk(ast.parse(source)) if (s := _client_service(n))}
    roles_of: dict[Path, set[str]] = {p: {"controller"} for p in plugin}
    roles_of.update({p: {"deconfigure"} for p in lambdas})
    calls: list[AwsCall] = []
    for role in NODE_ROLES:
        text = user_data_text(role)
        scripts = scripts_run(text)
        for path in modules_started("\n".join([text, *(s.read_text(encoding="utf-8") for s in scripts)])):
            roles_of.setdefault(path, set()).add(role)
        calls += [
            AwsCall(c.service, c.operation, c.origin, frozenset({role}), c.argv)
            for c in script_calls(text, f"user data ({role})")
        ]
        for script in scripts:
            rel = str(script.relative_to(REPO))
            calls += [
                AwsCall(c.service, c.operation, c.origin, frozenset({role}), c.argv)
                for c in script_calls(script.read_text(encoding="utf-8"), rel)
            ]
    for path, source in trees.items():
        rel = str(path.relative_to(REPO))
        for call in python_calls(source, rel, services, makers):
            calls.append(AwsCall(call.service, call.operation, call.origin, frozenset(roles_of[path])))
    return calls
