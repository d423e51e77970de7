"""EC2 limits simulated (issue 17): the real resume plugin against a model of EC2's throttling, capacity and boots.

`python -m bench.ec2_sim` drives `slurm_plugin.powersave.launcher.resume_nodes` (the real planner, the real EC2
adapter, a real botocore client with the plugin's retry policy) against `ec2_model.Ec2Model` (token buckets from EC2's
documented throttling model, per AZ/type capacity with random capacity errors, a boot-time distribution) under a
virtual clock, and reports the time to N running nodes against the floor the rate limits allow. See bench/README.md,
section "EC2 limits simulated (issue 17)".

Modules: `clock` (virtual time, cooperative threads), `buckets` (token buckets, the documented limits), `ec2_model`
(EC2's answers), `wire` (the model behind a real botocore client), `slurm_model` (slurmctld's power-save cycle),
`driver` (one scenario), `floor` (the analytic floor), `report` (JSON, table, plots).
"""
