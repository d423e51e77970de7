"""The cluster manager (`slurm-clustermgr`): keeps EC2 and Slurm in agreement.

observe (Slurm nodes + the cluster's instances) → reconcile (pure) → apply (batched scontrol / TerminateInstances),
plus events (SQS: spot interruptions, rebalance, state changes, scheduled events) and metrics (counters in state_dir).
"""
