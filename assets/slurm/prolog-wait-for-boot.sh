#!/bin/bash
# PrologSlurmctld of elastic-slurm: wait (bounded) until none of the job's nodes is POWERED_DOWN or POWERING_UP.
#
# Why: a batch job on freshly resumed cloud nodes otherwise stays CONFIGURING until slurmctld's periodic pass (every
# 30 s); when this prolog ends and the nodes are ready, slurmctld launches the job at once. See
# docs / shared reference "local-slurm-pitfalls". Both states are tested on all nodes: right after allocation the
# node is still POWERED_DOWN, ResumeProgram only moves it to POWERING_UP a moment later.
#
# Always exits 0: a non-zero exit would requeue or hold the job. It gives up after WAIT_LIMIT seconds (render sets it
# to ResumeTimeout) and as soon as the job is no longer CONFIGURING (e.g. requeued because a node never booted).
#
# slurmctld runs it with no PATH and no SLURM_CONF: settings come from an env file written by `elastic-slurm render`,
# found at $ELASTIC_SLURM_PROLOG_ENV, else /etc/elastic-slurm/prolog-wait-for-boot.env (where the controller's boot
# installs it), else beside this script as prolog-wait-for-boot.env. Keys:
#   SLURM_BIN_DIR (default /usr/bin), SLURM_CONF (optional), WAIT_LIMIT (seconds, default 600),
#   POLL_INTERVAL (seconds, default 1), PROLOG_LOG (optional file to append one line per decision to).
export PATH=/usr/bin:/bin

env_file=${ELASTIC_SLURM_PROLOG_ENV:-/etc/elastic-slurm/prolog-wait-for-boot.env}
[[ -r $env_file ]] || env_file="${BASH_SOURCE[0]%/*}/prolog-wait-for-boot.env"
if [[ -r $env_file ]]; then
    # shellcheck disable=SC1090
    source "$env_file" || true
fi
SLURM_BIN_DIR=${SLURM_BIN_DIR:-/usr/bin}
WAIT_LIMIT=${WAIT_LIMIT:-600}
POLL_INTERVAL=${POLL_INTERVAL:-1}
[[ -n ${SLURM_CONF:-} ]] && export SLURM_CONF

log() {
    [[ -n ${PROLOG_LOG:-} ]] && printf '%s prolog job %s: %s\n' "$(date -u +%FT%TZ)" "${SLURM_JOB_ID:-?}" "$*" >>"$PROLOG_LOG"
    return 0
}

# The job's state word (CONFIGURING, RUNNING, PENDING, ...), empty when the job cannot be read.
job_state() {
    local out
    out=$("$SLURM_BIN_DIR/scontrol" -o show job "$SLURM_JOB_ID" 2>/dev/null) || return 0
    [[ $out =~ (^|[[:space:]])JobState=([A-Z_]+) ]] && printf '%s' "${BASH_REMATCH[2]}"
}

# Succeeds while some node of the job is still powered down or powering up (or the nodes cannot be read).
nodes_booting() {
    local out
    out=$("$SLURM_BIN_DIR/scontrol" -o show node "$SLURM_JOB_NODELIST" 2>/dev/null) || return 0
    [[ -z $out ]] && return 0
    [[ $out =~ State=[A-Z_+]*(POWERED_DOWN|POWERING_UP) ]]
}

main() {
    if [[ -z ${SLURM_JOB_ID:-} || -z ${SLURM_JOB_NODELIST:-} ]]; then
        log "no SLURM_JOB_ID or SLURM_JOB_NODELIST; nothing to wait for"
        return 0
    fi
    local start=$SECONDS state
    while ((SECONDS - start < WAIT_LIMIT)); do
        if ! nodes_booting; then
            log "nodes $SLURM_JOB_NODELIST up after $((SECONDS - start)) s"
            return 0
        fi
        state=$(job_state)
        if [[ $state != CONFIGURING ]]; then
            log "job is ${state:-gone}, no longer CONFIGURING; stop waiting"
            return 0
        fi
        sleep "$POLL_INTERVAL"
    done
    log "gave up after ${WAIT_LIMIT} s; the job starts at slurmctld's next pass"
    return 0
}

main
exit 0
