"""The plugin's one retry policy for AWS calls, by error class, on top of botocore's `standard` retry mode.

| error class | examples | what happens |
|---|---|---|
| capacity / quota | InsufficientInstanceCapacity (EC2 answers it with HTTP 500), InstanceLimitExceeded | never retried: the launcher fails over to the next type/AZ/region at once, and no retry quota is spent |
| throttling | RequestLimitExceeded | botocore's backoff (up to 20 s a try) within MAX_ATTEMPTS |
| transport, other 5xx | read timeout, connection reset, InternalError | retried with the same parameters, so a launch keeps its ClientToken and EC2 answers the first launch again |
| anything else | InvalidParameterValue, UnauthorizedOperation | not retried |

botocore's standard mode retries every HTTP 500, so it would retry a capacity error up to MAX_ATTEMPTS times per
location and drain the client's retry quota; `install` wraps botocore's own standard handler to skip those codes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.config import Config
from botocore.retries import standard

from slurm_plugin.powersave.planner import CAPACITY_ERROR_CODES

MAX_ATTEMPTS = 6
CONFIG = Config(retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS}, connect_timeout=10, read_timeout=60)
NEVER_RETRIED = CAPACITY_ERROR_CODES
THROTTLING_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException", "EC2ThrottledException"})


def error_class(code: str | None) -> str:
    """`capacity`, `throttling`, `transport` (no code: the call did not get an answer) or `other`."""
    if code is None:
        return "transport"
    if code in NEVER_RETRIED:
        return "capacity"
    if code in THROTTLING_CODES:
        return "throttling"
    return "other"


def _error_code(response: Any) -> str | None:
    if not isinstance(response, tuple) or len(response) != 2 or not isinstance(response[1], dict):
        return None
    code = response[1].get("Error", {}).get("Code")
    return str(code) if code else None


def install(client: Any, max_attempts: int = MAX_ATTEMPTS, on_throttle: Callable[[str], None] | None = None) -> Any:
    """Give `client` (created with CONFIG) the plugin's policy: botocore's standard handler, minus capacity errors.
    `on_throttle(operation name)` is called for each throttled answer (each try, retried or not)."""
    service = client.meta.service_model.service_id.hyphenize()
    unique_id = f"retry-config-{service}"
    client.meta.events.unregister(f"needs-retry.{service}", unique_id=unique_id)
    handler = standard.register_retry_handler(client, max_attempts=max_attempts)
    client.meta.events.unregister(f"needs-retry.{service}", unique_id=unique_id)

    def needs_retry(**kwargs: Any) -> float | None:
        code = _error_code(kwargs.get("response"))
        if code in NEVER_RETRIED:
            return None
        if on_throttle is not None and code in THROTTLING_CODES:
            operation = kwargs.get("operation")
            on_throttle(str(getattr(operation, "name", "")))
        delay: float | None = handler.needs_retry(**kwargs)
        return delay

    client.meta.events.register(f"needs-retry.{service}", needs_retry, unique_id=unique_id)
    return client
