"""The `elastic-slurm` command line: config validation, rendering, CDK synth and the local cloud."""
