"""The exceptions `elastic-slurm` turns into one line on stderr (elastic_slurm/cli.py), each with its exit code
(elastic_slurm/exit_codes.py)."""


class UserError(Exception):
    """Bad input or an unusable environment (exit 2). The message is a single line naming the field or argument."""


class OperationFailed(UserError):
    """The operation was tried and failed: AWS refused or could not be reached, a cluster is not deployed, the operator
    declined a confirmation (exit 1). One line, like UserError."""
