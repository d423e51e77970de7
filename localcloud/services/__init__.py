"""Host processes the local cloud starts and stops: Slurm daemons, slapd, Prometheus, the browser."""
