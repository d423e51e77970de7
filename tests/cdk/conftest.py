"""The CDK tests read the session's synthesized assemblies (tests/synth.py; the fixtures are the root conftest's, so
every test directory shares one synthesis per session). Re-exported here for the tests' imports."""

from __future__ import annotations

from tests.synth import CONFIGS, REPO_ROOT, Assembly, offline_env, run_synth, synth_once

__all__ = ["CONFIGS", "REPO_ROOT", "Assembly", "offline_env", "run_synth", "synth_once"]
