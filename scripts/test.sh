#!/usr/bin/env bash
# `make test`: setup, lint, type check and the whole suite — with the Slurm roots built *meanwhile* on a machine that
# lacks them (a fresh one: the image root's build is minutes of both cores). The build starts right after setup, in
# the background; lint, mypy and the tests that need no root run while it builds (tests/conftest.py runs those first
# when ELASTIC_SLURM_ROOTS_BUILDING is set); a test that needs a root waits for its build (localcloud.image.one_builder)
# and a failed build fails those tests with its one line. With the roots cached this is exactly setup, lint, mypy,
# pytest. The build is waited for before the script ends, whatever the tests did, so no builder outlives it.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PWD/node_modules/.bin:$PATH"
ELASTIC_SLURM_ROOTS=later scripts/setup.sh || exit 1

releases=(${ELASTIC_SLURM_RELEASES:-26.05 24.11})
builder=
if [ "$(id -u)" = 0 ]; then
  missing=$(.venv/bin/python -c 'import sys; from localcloud.image import slurm_root
print(" ".join(r for r in sys.argv[1:] if not slurm_root.is_built(r)))' "${releases[@]}") || exit 1
  if [ -n "$missing" ]; then
    log=.stamps/slurm-roots.log
    echo "test: building the Slurm roots ($missing) in the background meanwhile; log: $log"
    (for release in $missing; do .venv/bin/python -m localcloud.image.slurm_root build --slurm "$release" || exit 1
     done) > "$log" 2>&1 &
    builder=$!
    export ELASTIC_SLURM_ROOTS_BUILDING=1
  fi
fi

finish() {  # the build ends before the script does: its result is the cache the next run uses
  local rc=$1
  if [ -n "$builder" ]; then
    if ! wait "$builder"; then echo "test: building the Slurm roots failed: $(tail -1 "$log")" >&2; rc=1; fi
  fi
  exit "$rc"
}

ELASTIC_SLURM_ROOTS=later make --no-print-directory lint typecheck || finish 1
.venv/bin/python -m pytest -q -ra -n 4 --dist loadfile --durations=15 tests
finish $?
