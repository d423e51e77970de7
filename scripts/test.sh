#!/usr/bin/env bash
# `make test`: setup, lint, type check and the whole suite — with the Slurm roots built *meanwhile* on a machine that
# lacks them (a fresh one). Each missing root's build starts as soon as the apt packages and the venv's runtime part
# are in, in the background, in a session of its own; the rest of the setup, lint, mypy and the tests that need no
# root run while they build (tests/conftest.py collects those first
# when ELASTIC_SLURM_ROOTS_BUILDING is set, and xdist keeps that order); a test that needs a root waits for its build
# (localcloud.image.one_builder) outside its timeout, and a failed build fails those tests with its one line. With the
# roots cached this is exactly setup, lint, mypy, pytest. The builds are waited for before the script ends, whatever
# the tests did; an interrupt (Ctrl-C, SIGTERM) stops them, by their process groups, and removes their partial roots.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PWD/node_modules/.bin:$PATH"
scripts/setup.sh runtime || exit 1  # apt packages and the venv's runtime part: enough to build the roots

builders=()
declare -A release_of=()
stop_builders() {
  local pid
  for pid in "${builders[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  wait
  exit 130
}
trap stop_builders INT TERM
if [ "$(id -u)" = 0 ]; then
  # shellcheck disable=SC2086  # the release list is words, as in setup.sh
  missing=$(.venv/bin/python -c 'import sys; from localcloud.image import slurm_root
print(" ".join(r for r in sys.argv[1:] if not slurm_root.is_built(r)))' ${ELASTIC_SLURM_RELEASES:-26.05 24.11}) || exit 1
  for release in $missing; do
    log=".stamps/slurm-root-$release.log"
    echo "test: building the Slurm $release root in the background meanwhile; log: $log"
    # not a process group leader (no job control here), so setsid starts a new session without forking: $! is the
    # builder, and the leader of the group stop_builders signals. The build is what the e2e tests wait for, so it goes
    # before the tests that run meanwhile: a new session is a scheduler autogroup of its own (where the kernel has
    # them), which gets CPU as a whole by the autogroup's nice; nice -n covers kernels without autogroups.
    setsid sh -c 'echo -10 > /proc/self/autogroup 2>/dev/null; exec nice -n -5 "$@"' builder \
      .venv/bin/python -m localcloud.image.slurm_root build --slurm "$release" > "$log" 2>&1 &
    builders+=("$!")
    release_of[$!]=$release
  done
fi
pytest_args=()
if [ "${#builders[@]}" -gt 0 ]; then
  export ELASTIC_SLURM_ROOTS_BUILDING=1
  pytest_args=(--no-loadscope-reorder)  # keep the order tests/conftest.py gave: the tests that need no root first
fi

finish() {
  local rc=$1 pid log
  [ "${#builders[@]}" = 0 ] || echo "test: waiting for the Slurm root builds (logs: .stamps/slurm-root-*.log)"
  for pid in "${builders[@]}"; do
    log=".stamps/slurm-root-${release_of[$pid]}.log"
    if ! wait "$pid"; then echo "test: building the Slurm ${release_of[$pid]} root failed: $(tail -1 "$log")" >&2; rc=1; fi
  done
  exit "$rc"
}

ELASTIC_SLURM_ROOTS=later scripts/setup.sh || finish 1  # the rest of the venv and the CDK CLI, meanwhile
ELASTIC_SLURM_ROOTS=later make --no-print-directory lint typecheck || finish 1
.venv/bin/python -m pytest -q -ra -n 4 --dist loadfile --durations=15 "${pytest_args[@]}" tests
finish $?
