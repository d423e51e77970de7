"""Runs on the Slurm controller. Imports nothing from CDK. Rooms:

- `powersave/` — what slurmctld runs: ResumeProgram, SuspendProgram, ResumeFailProgram (foreground + worker), launch
  planning (pure), the EC2 and scontrol adapters, retries, claims and the node map, capacity cool-down, protected mode;
- `manager/` — the cluster manager daemon (`slurm-clustermgr`): observe → reconcile (pure) → apply;
- `render/` — cluster config → slurm.conf (base + fragments), slurmdbd.conf, gres.conf, the runtime manifest;
- `accounting/` — the desired accounting state and `slurm-accounting-apply` (sacctmgr);
- `licenses/` — `slurm-license-sync` (FlexLM/RLM → Slurm remote licenses);
- shared: `manifest.py` (the runtime manifest every program reads), `instance_cache*.py`, `hostlists.py`, `logs.py`.

Pure decisions live apart from the EC2 and Slurm adapters (functional core, imperative shell).
"""
