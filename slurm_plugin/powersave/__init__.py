"""The power-save plugin slurmctld runs: `slurm-resume`, `slurm-suspend`, `slurm-resume-fail` (resume.py, suspend.py:
a fast foreground in background.py hands work to a detached worker), the launch core (launcher.py, planner.py pure),
termination (terminator.py), the adapters (ec2.py with retry_policy.py, slurm.py), shared state (state.py: claims and
the node map; capacity.py: cool-down; protection.py: protected mode) and what Slurm is told (unusable_pools.py).
"""
