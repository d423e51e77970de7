#!/bin/bash
# PrologSlurmctld of elastic-slurm: wait (bounded) until none of the job's nodes is POWERED_DOWN or POWERING_UP.
#
# Why: a batch job on freshly resumed cloud nodes otherwise stays CONFIGURING until slurmctld's periodic pass (every
# 30 s); when this prolog ends and the nodes are ready, slurmctld launches the job at once. Both states count: right
# after allocation the node is still POWERED_DOWN, ResumeProgram only moves it to POWERING_UP a moment later.
# docs/cold-start.md is the whole path. `elastic-slurm render` names it PrologSlurmctld only while the cluster's
# `slurm.early_start` is on (the default; docs/cold-start.md weighs its cost and gain).
#
# Always exits 0: a non-zero exit would requeue or hold the job. It gives up after WAIT_LIMIT seconds (render sets it
# to ResumeTimeout) and as soon as the job is no longer CONFIGURING (e.g. requeued because a node never booted).
#
# Cheap per job, because slurmctld runs it for every job, also on warm nodes, thousands at once in a burst: it asks
# Slurm nothing while the controller's boot watch (slurm_plugin/bootwatch.py) lives, and starts three small
# processes (mkfifo, mv, rm). It makes the FIFO $BOOTWATCH_DIR/wait/<job id>.fifo, writes the job's hostlist to
# $BOOTWATCH_DIR/wait/<job id> and blocks reading the FIFO (one wake-up every WATCH_SLICE seconds to read the boot
# watch's heartbeat, a file read by the shell itself). The boot watch looks at the job's nodes and writes `up` into the
# FIFO once none is booting (at once for a job on warm nodes), `stop` once the job is no longer CONFIGURING.
#
# Bounded fallback: with no boot watch, or a heartbeat older than WATCH_STALE seconds (a boot watch that is gone, not
# one that is slow: its heartbeat comes from a thread of its own), it asks Slurm itself: one booting node every
# DIRECT_GAP seconds and its job's state every JOB_CHECK seconds, still reading the FIFO between looks; a fresh
# heartbeat ends that. It never launches anything: ResumeProgram, called by slurmctld's power-save thread within a
# second, is the one launch path.
#
# slurmctld runs it with no PATH and no SLURM_CONF: settings come from an env file written by `elastic-slurm render`,
# found at $ELASTIC_SLURM_PROLOG_ENV, else /etc/elastic-slurm/prolog-wait-for-boot.env (where the controller's boot
# installs it), else beside this script as prolog-wait-for-boot.env. Keys (whole seconds unless said):
#   SLURM_BIN_DIR (default /usr/bin), SLURM_CONF (optional), WAIT_LIMIT (default 600), BOOTWATCH_DIR (unset: no boot
#   watch), WATCH_SLICE (default 5), WATCH_STALE (default 60), DIRECT_GAP (seconds, may be fractional, default 5),
#   JOB_CHECK (default 5), PROLOG_LOG (optional file to append one line per decision to). The prolog launches
#   nothing: ResumeProgram is the only launch path (docs/cold-start.md).
export PATH=/usr/bin:/bin

env_file=${ELASTIC_SLURM_PROLOG_ENV:-/etc/elastic-slurm/prolog-wait-for-boot.env}
[[ -r $env_file ]] || env_file="${BASH_SOURCE[0]%/*}/prolog-wait-for-boot.env"
if [[ -r $env_file ]]; then
    # shellcheck disable=SC1090
    source "$env_file" || true
fi
whole() { [[ ${!1:-} =~ ^[0-9]+$ ]] || printf -v "$1" '%s' "$2"; }  # whole NAME DEFAULT: no subshell
SLURM_BIN_DIR=${SLURM_BIN_DIR:-/usr/bin}
whole WAIT_LIMIT 600
whole JOB_CHECK 5
whole WATCH_SLICE 5
whole WATCH_STALE 60
[[ ${DIRECT_GAP:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || DIRECT_GAP=5
[[ -n ${SLURM_CONF:-} ]] && export SLURM_CONF

log() {  # the time from the shell's own printf: no process
    [[ -n ${PROLOG_LOG:-} ]] && TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T prolog job %s: %s\n' -1 "${SLURM_JOB_ID:-?}" "$*" >>"$PROLOG_LOG"
    return 0
}

# The job's state word (CONFIGURING, RUNNING, PENDING, ...), empty when the job cannot be read.
job_state() {
    local out
    out=$("$SLURM_BIN_DIR/scontrol" -o show job "$SLURM_JOB_ID" 2>/dev/null) || return 0
    [[ $out =~ (^|[[:space:]])JobState=([A-Z_]+) ]] && printf '%s' "${BASH_REMATCH[2]}"
}

# The node's state with all its flags, lower case (e.g. allocated+cloud+powered_down); empty when unreadable.
node_state() {
    local out
    out=$("$SLURM_BIN_DIR/sinfo" -a -h -N -n "$1" -O StateComplete:120 2>/dev/null) || return 0
    out=${out,,}
    printf '%s' "${out%%[[:space:]]*}"
}

# Succeeds while a node is powered down or powering up (or its state is unknown).
booting() {
    [[ -z $1 || $1 =~ (powered_down|powering_up) ]]
}

# watch_fresh: the boot watch's heartbeat (an epoch second, read by the shell) is recent
watch_fresh() {
    local beat=""
    read -r beat <"$BOOTWATCH_DIR/heartbeat" 2>/dev/null || return 1
    [[ $beat =~ ^[0-9]+$ ]] && ((EPOCHSECONDS - beat <= WATCH_STALE))
}

# watch_setup: the FIFO this prolog reads, then the wait file the boot watch reads (it writes to the FIFO of a wait
# file it finds); fails when the boot watch's directory is not there
watch_setup() {
    [[ -n ${BOOTWATCH_DIR:-} && -d $BOOTWATCH_DIR/wait ]] || return 1
    WAIT_FILE=$BOOTWATCH_DIR/wait/$SLURM_JOB_ID
    FIFO=$WAIT_FILE.fifo
    if ! mkfifo -m 0600 "$FIFO" 2>/dev/null; then  # left by an earlier run of a requeued job: its words are old
        rm -f "$FIFO" "$WAIT_FILE"
        mkfifo -m 0600 "$FIFO" 2>/dev/null || return 1
    fi
    exec {fd}<>"$FIFO" || return 1
    printf '%s\n' "$SLURM_JOB_NODELIST" >"$WAIT_FILE.tmp" 2>/dev/null && mv -f "$WAIT_FILE.tmp" "$WAIT_FILE" && return 0
    exec {fd}>&-
    rm -f "$FIFO" "$WAIT_FILE.tmp"
    return 1
}

# word_outcome WORD: what a word from the boot watch means (empty: keep waiting); sets outcome
word_outcome() {
    case $1 in
        up) outcome="nodes $SLURM_JOB_NODELIST up after $((SECONDS - start)) s (boot watch)" ;;
        stop) outcome="job no longer CONFIGURING after $((SECONDS - start)) s (boot watch); stop waiting" ;;
    esac
}

# direct_look: one look of its own (fallback): the job's state every JOB_CHECK s, one booting node; sets outcome
direct_look() {
    local job
    if ((SECONDS - checked >= JOB_CHECK)); then
        checked=$SECONDS
        job=$(job_state)
        if [[ $job != CONFIGURING ]]; then
            outcome="job is ${job:-gone}, no longer CONFIGURING; stop waiting"
            return 0
        fi
    fi
    if ((!expanded)); then  # expanded locally: `scontrol show hostnames` asks slurmctld nothing
        mapfile -t WAITING < <("$SLURM_BIN_DIR/scontrol" show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null)
        ((${#WAITING[@]})) || WAITING=("$SLURM_JOB_NODELIST")
        expanded=1
    fi
    while ((${#WAITING[@]})) && ! booting "$(node_state "${WAITING[0]}")"; do WAITING=("${WAITING[@]:1}"); done
    ((${#WAITING[@]})) || outcome="nodes $SLURM_JOB_NODELIST up after $((SECONDS - start)) s"
}

main() {
    if [[ -z ${SLURM_JOB_ID:-} || -z ${SLURM_JOB_NODELIST:-} ]]; then
        log "no SLURM_JOB_ID or SLURM_JOB_NODELIST; nothing to wait for"
        return 0
    fi
    local word left slice watched=0 direct=0 expanded=0 outcome=""
    start=$SECONDS checked=$SECONDS
    WAIT_FILE="" FIFO="" WAITING=()
    if watch_setup; then
        watched=1
        watch_fresh || { direct=1; log "boot watch silent; asking Slurm too"; }
    else
        exec {fd}<> <(:)  # `read -t` on it: a sleep that starts no process
        direct=1
    fi
    ((direct)) && direct_look
    while [[ -z $outcome ]]; do
        left=$((WAIT_LIMIT - (SECONDS - start)))
        ((left > 0)) || break
        if ((direct)); then
            slice=$DIRECT_GAP
        else
            slice=$((left < WATCH_SLICE ? left : WATCH_SLICE))
        fi
        if read -r -t "$slice" -u "$fd" word; then
            word_outcome "$word"
            continue
        fi
        if ((watched)); then
            if watch_fresh; then
                ((direct)) && log "boot watch back"
                direct=0
            elif ((!direct)); then
                direct=1
                log "boot watch silent for over ${WATCH_STALE} s; asking Slurm too"
            fi
        fi
        ((direct)) && direct_look
    done
    [[ -n $outcome ]] || outcome="gave up after ${WAIT_LIMIT} s; the job starts at slurmctld's next pass"
    log "$outcome"
    ((watched)) && rm -f "$WAIT_FILE" "$FIFO"
    exec {fd}>&-
    return 0
}

main
exit 0
