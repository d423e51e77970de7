"""What `elastic-slurm cluster ...` needs besides argparse: AWS reads (deployed config, stack and controller status),
the CDK CLI command lines, and the stacks of a synthesized cloud assembly."""
