"""Exit codes of every `elastic-slurm` command, project-wide (docs/validate.md shows this table):

| code | name             | meaning                                                                          |
|------|------------------|----------------------------------------------------------------------------------|
| 0    | OK               | done; for `validate`: every file is valid (warnings may have been printed)       |
| 1    | FAILED           | the operation was tried and failed (AWS, Slurm, a deploy, a file that can't be written) |
| 2    | USAGE            | the command line is wrong: unknown command or option, a missing or bad argument  |
| 3    | INVALID_CONFIG   | a cluster YAML is invalid: one line per problem, each naming its YAML path        |
| 130  | INTERRUPTED      | stopped by Ctrl-C                                                                 |

Scripts can tell "fix the file" (3) from "fix the command" (2) from "retry or investigate" (1).
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
INVALID_CONFIG = 3
INTERRUPTED = 130
