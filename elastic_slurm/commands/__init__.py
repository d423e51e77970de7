"""One module per `elastic-slurm` subcommand (or group); each exposes `register(subparsers)`."""
