"""License-server sync: parse FlexLM/RLM status output and keep Slurm's remote-license counts honest."""
