"""The image root file systems the local cloud runs Slurm from, built by the image component's own steps."""
