"""Contract tests: what AWS enforces at run time (IAM, security groups, file-system policies, stack order, per-OS
packages), checked on the templates we synthesize ourselves, both sides derived from our own outputs.

Every example config and every test-only config of tests/cdk/configs/ is synthesized once per session by the real
CDK CLI (the `assemblies` fixture of tests/synth.py, registered by the root conftest for every test directory). Each contract also has a negative case: a
deliberately broken variant of a template (or of the code's side) that the contract must catch, so a contract that
can never fail is noticed.
"""

from __future__ import annotations
