"""The EC2 tag keys elastic-slurm sets and looks instances up by: constants only, no imports, so a boot-time program
(slurm_plugin/predecessor.py) names them without importing the manifest's pydantic models."""

from __future__ import annotations

TAG_CLUSTER = "elastic-slurm:cluster"
TAG_POOL = "elastic-slurm:pool"
TAG_LAUNCH_REQUEST = "elastic-slurm:launch-request"
TAG_ROLE = "elastic-slurm:role"
TAG_LOGIN_POOL = "elastic-slurm:login-pool"  # value: the login pool of a login node (no pool tag: no Slurm node)
TAG_SUBMIT_HOST = "elastic-slurm:submit-host"  # value: the cluster a submit host belongs to
