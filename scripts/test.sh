#!/usr/bin/env bash
# `make test`: setup, lint, type check and the whole suite — with the Slurm roots built *meanwhile* on a machine that
# lacks them (a fresh one). Each missing root's build starts as soon as the apt packages it needs and the venv's
# runtime part are in, in the background, in a session of its own. The suite runs in two parts side by side
# (`--root-tests`, tests/conftest.py): the tests that run Slurm wait for their root's build
# (localcloud.image.one_builder) outside their timeout — a failed build fails them with its one line — while the rest
# of the setup, lint, mypy and the tests that need no root run; a failing lint or type check fails the run after both
# parts. The builds are waited for before the script ends, whatever the tests did; an interrupt (Ctrl-C,
# SIGTERM) stops them by their process groups, which removes their partial roots, and the Slurm part by SIGINT, which
# tears its local clouds down.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PWD/node_modules/.bin:$PATH"
scripts/setup.sh runtime || exit 1  # the apt packages and the venv's runtime part the root builds need

builders=()
declare -A release_of=()
slurm_tests= no_root_tests=
stop_all() {
  local pid
  for pid in "${builders[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  # pytest, workers included, tears its local clouds down on SIGINT (KeyboardInterrupt), as on Ctrl-C in a terminal
  for pid in $slurm_tests $no_root_tests; do kill -INT -- "-$pid" 2>/dev/null; done
  wait
  exit 130
}
trap stop_all INT TERM
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

# The suite in two parts side by side, one test file per worker at a time (--dist loadfile). The tests that run Slurm
# (a root's programs: the e2e files, each with a local cloud) mostly wait on Slurm's timers (4 workers alone kept the
# CPU at ~115 %), so they get more workers (ELASTIC_SLURM_E2E_WORKERS, default 6), longest file first, and wait for
# the root builds. The others (lint, mypy, synth, cfn-lint, units) are CPU-bound: 2 workers, overlapping the builds,
# in a session of their own (one scheduler autogroup, as the Slurm part's; tried: that autogroup at nice 10 starved
# the shared synth past its 300 s timeout and made the run 2 min longer). The Slurm part's output streams; the other
# part's goes to .stamps/tests-no-root.log, printed when both are done.
pytest_common=(-q -ra --dist loadfile --durations=10)
no_root_log=.stamps/tests-no-root.log
setsid .venv/bin/python -m pytest "${pytest_common[@]}" -n "${ELASTIC_SLURM_E2E_WORKERS:-6}" --root-tests=only \
  --no-loadscope-reorder tests &
slurm_tests=$!
# shellcheck disable=SC2016  # expanded by the inner shell
setsid bash -c '
  ELASTIC_SLURM_ROOTS=later make --no-print-directory lint typecheck && \
  .venv/bin/python -m pytest "$@" -n 2 --root-tests=none tests' no-root "${pytest_common[@]}" > "$no_root_log" 2>&1 &
no_root_tests=$!
wait "$no_root_tests"
no_root_rc=$?
no_root_tests=
wait "$slurm_tests"
slurm_rc=$?
slurm_tests=
echo "test: lint, type check and the tests that run no Slurm ($no_root_log):"
cat "$no_root_log"
rc=0
[ "$no_root_rc" = 0 ] && [ "$slurm_rc" = 0 ] || rc=1
finish "$rc"
