"""Logging for the plugin's entry points: one line per decision, to the manifest's log file and (foreground) stderr."""

from __future__ import annotations

import logging
import os
import sys

FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def setup(log_file: str | None, name: str, stderr: bool = True) -> logging.Logger:
    """Configure the root logger once for this process and return the entry point's logger."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    formatter = logging.Formatter(FORMAT)
    if log_file:
        try:
            os.makedirs(os.path.dirname(log_file) or ".", exist_ok=True)
            file_handler = logging.FileHandler(log_file, encoding="utf-8")
            file_handler.setFormatter(formatter)
            root.addHandler(file_handler)
        except OSError as exc:
            print(f"{name}: cannot open log file {log_file}: {exc.strerror}", file=sys.stderr)
    if stderr:
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(logging.Formatter(f"{name}: %(levelname)s %(message)s"))
        root.addHandler(err)
    for noisy in ("botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return logging.getLogger(name)
