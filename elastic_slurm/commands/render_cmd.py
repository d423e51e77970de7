"""Placeholder: `render_cmd` is being written (see the issue tracker); registers nothing yet."""

from typing import Any


def register(sub: Any) -> None:
    """Register nothing until the command exists."""
