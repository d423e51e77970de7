"""The local cloud: real Slurm daemons + emulated AWS (moto server) + an instance runner, on one machine.

Entry point: `localcloud.cloud.LocalCloud` (also behind `elastic-slurm local up|down|status|interrupt`).
"""
