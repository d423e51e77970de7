"""AWS ParallelCluster's resume, run side by side with ours on the same emulated EC2 (issue 33's comparison).

- `source.py`: aws-parallelcluster-node's source at a pinned tag (sha256-checked tag archive: cache, source mirror,
  then GitHub), extracted once into the root cache;
- `side.py`: the pool, launch templates, DynamoDB table and resume file ParallelCluster expects, built from the same
  network our rows use; runs `runner.py` and turns its output into a bench row;
- `runner.py`: the process that imports ParallelCluster's `slurm_plugin` (same name as ours) and runs its
  `InstanceManager.add_instances`, Slurm's `scontrol update` recorded instead of run.
"""
