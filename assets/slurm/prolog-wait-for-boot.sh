#!/bin/bash
# PrologSlurmctld of elastic-slurm: wait (bounded) until none of the job's nodes is POWERED_DOWN or POWERING_UP.
#
# Why: a batch job on freshly resumed cloud nodes otherwise stays CONFIGURING until slurmctld's periodic pass (every
# 30 s); when this prolog ends and the nodes are ready, slurmctld launches the job at once. Both states count: right
# after allocation the node is still POWERED_DOWN, ResumeProgram only moves it to POWERING_UP a moment later.
# docs/cold-start.md is the whole path.
#
# Always exits 0: a non-zero exit would requeue or hold the job. It gives up after WAIT_LIMIT seconds (render sets it
# to ResumeTimeout) and as soon as the job is no longer CONFIGURING (e.g. requeued because a node never booted).
#
# 1. First look: the state of each of its job's nodes, once (`sinfo -n NODE` per node for up to 8 nodes: the
#    partition table and that one node; one `sinfo` of the whole table for a bigger job; never `scontrol show node`,
#    which reads the whole table whatever it is asked).
# 2. Early launch: slurmctld calls ResumeProgram at its power-save thread's next pass, up to a second after the
#    allocation that started this prolog. When a spare resume worker waits ($SPARES_DIR/*.fifo), the job's
#    powered-down nodes go to it now (`$RESUME_PROGRAM --early NODES`); ResumeProgram's own call then finds them
#    claimed or bound and launches nothing more (slurm_plugin/powersave/resume.py `early`).
# 3. Wait without polling Slurm: the booting nodes' names go to $BOOTWATCH_DIR/wait/<job id> (rewritten every
#    JOB_CHECK seconds), and it waits for $BOOTWATCH_DIR/up/<job id>, which the controller's one boot watch
#    (slurm_plugin/bootwatch.py) writes once they are up: a file test every WATCH_POLL seconds, no process, no RPC.
#    Every JOB_CHECK seconds it asks for its job's state (`scontrol show job ID`, a single-job RPC) and whether the
#    boot watch's heartbeat is newer than its last rewrite. After WATCH_SILENT such checks in a row without (no boot
#    watch, or one that hangs), it also asks Slurm itself, one booting node at a time, every DIRECT_TICKS ticks; a
#    heartbeat that comes back ends that.
#
# slurmctld runs it with no PATH and no SLURM_CONF: settings come from an env file written by `elastic-slurm render`,
# found at $ELASTIC_SLURM_PROLOG_ENV, else /etc/elastic-slurm/prolog-wait-for-boot.env (where the controller's boot
# installs it), else beside this script as prolog-wait-for-boot.env. Keys (whole seconds unless said):
#   SLURM_BIN_DIR (default /usr/bin), SLURM_CONF (optional), WAIT_LIMIT (default 600), JOB_CHECK (default 5),
#   BOOTWATCH_DIR (unset: no boot watch), WATCH_POLL (seconds, may be fractional, default 0.1), WATCH_SILENT (checks,
#   default 6), DIRECT_TICKS (WATCH_POLL ticks between its own looks at a node, default 20), RESUME_PROGRAM and
#   SPARES_DIR (unset: no early launch), PROLOG_LOG (optional file to append one line per decision to).
export PATH=/usr/bin:/bin

env_file=${ELASTIC_SLURM_PROLOG_ENV:-/etc/elastic-slurm/prolog-wait-for-boot.env}
[[ -r $env_file ]] || env_file="${BASH_SOURCE[0]%/*}/prolog-wait-for-boot.env"
if [[ -r $env_file ]]; then
    # shellcheck disable=SC1090
    source "$env_file" || true
fi
whole() { [[ $1 =~ ^[0-9]+$ ]] && printf '%s' "$1" || printf '%s' "$2"; }  # whole NUMBER DEFAULT
SLURM_BIN_DIR=${SLURM_BIN_DIR:-/usr/bin}
WAIT_LIMIT=$(whole "${WAIT_LIMIT:-}" 600)
JOB_CHECK=$(whole "${JOB_CHECK:-}" 5)
WATCH_SILENT=$(whole "${WATCH_SILENT:-}" 6)
DIRECT_TICKS=$(whole "${DIRECT_TICKS:-}" 20)
WATCH_POLL=${WATCH_POLL:-0.1}
SINGLE_LIMIT=8
EARLY_LIMIT=1000  # more powered-down nodes than this: left to ResumeProgram (an argument must stay short)
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

# first_look NODE...: fills STATE[node] (a few nodes one by one, a big job with one whole-table sinfo)
declare -A STATE
first_look() {
    local node name state
    if (($# <= SINGLE_LIMIT)); then
        for node in "$@"; do STATE[$node]=$(node_state "$node"); done
        return 0
    fi
    while read -r name state; do
        [[ -n ${name:-} ]] && STATE[$name]=${state,,}
    done < <("$SLURM_BIN_DIR/sinfo" -a -h -N -n "$SLURM_JOB_NODELIST" -O NodeList:80,StateComplete:120 2>/dev/null)
}

# early_launch NODE...: the powered-down nodes to a waiting spare resume worker, when one waits
early_launch() {
    [[ -n ${RESUME_PROGRAM:-} && -n ${SPARES_DIR:-} ]] || return 0
    compgen -G "$SPARES_DIR/*.fifo" >/dev/null || return 0  # no spare waits: starting Python here would be for nothing
    (($# <= EARLY_LIMIT)) || return 0
    local list
    list=$(IFS=,; printf '%s' "$*")
    (($# == ${#NODES[@]})) && list=$SLURM_JOB_NODELIST  # every node of the job: its own short hostlist
    "$RESUME_PROGRAM" --early "$list" </dev/null >/dev/null 2>&1
    log "early launch of $list asked (exit $?)"
}

write_wait() {  # the booting nodes, written whole (a reader never sees half a file)
    printf '%s\n' "${WAITING[@]}" >"$WAIT_FILE.tmp" 2>/dev/null && mv -f "$WAIT_FILE.tmp" "$WAIT_FILE" 2>/dev/null
}

main() {
    if [[ -z ${SLURM_JOB_ID:-} || -z ${SLURM_JOB_NODELIST:-} ]]; then
        log "no SLURM_JOB_ID or SLURM_JOB_NODELIST; nothing to wait for"
        return 0
    fi
    local start=$SECONDS node job fd silent=0 tick=0 next=0 checked=$SECONDS outcome=""
    # expanded locally: `scontrol show hostnames` asks slurmctld nothing
    mapfile -t NODES < <("$SLURM_BIN_DIR/scontrol" show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null)
    ((${#NODES[@]})) || NODES=("$SLURM_JOB_NODELIST")
    first_look "${NODES[@]}"
    local down=()
    WAITING=()
    for node in "${NODES[@]}"; do
        booting "${STATE[$node]:-}" && WAITING+=("$node")
        [[ ${STATE[$node]:-} =~ powered_down && ! ${STATE[$node]} =~ powering_up ]] && down+=("$node")
    done
    ((${#down[@]})) && early_launch "${down[@]}"
    if ((${#WAITING[@]} == 0)); then
        log "nodes $SLURM_JOB_NODELIST up after $((SECONDS - start)) s"
        return 0
    fi
    WAIT_FILE="" UP_FILE=""
    if [[ -n ${BOOTWATCH_DIR:-} && -d $BOOTWATCH_DIR/wait ]]; then
        WAIT_FILE=$BOOTWATCH_DIR/wait/$SLURM_JOB_ID
        UP_FILE=$BOOTWATCH_DIR/up/$SLURM_JOB_ID
        rm -f "$UP_FILE"  # a requeued job keeps its id: an old up file is not about this wait
        write_wait || WAIT_FILE=""
    fi
    [[ -n $WAIT_FILE ]] || silent=$WATCH_SILENT  # no boot watch: ask Slurm directly from the start
    exec {fd}<> <(:)  # `read -t` on it: a sleep that starts no process
    while ((SECONDS - start < WAIT_LIMIT)); do
        if [[ -n $UP_FILE && -e $UP_FILE ]]; then
            outcome="nodes $SLURM_JOB_NODELIST up after $((SECONDS - start)) s (boot watch)"
            break
        fi
        if ((SECONDS - checked >= JOB_CHECK)); then
            checked=$SECONDS
            job=$(job_state)
            if [[ $job != CONFIGURING ]]; then
                outcome="job is ${job:-gone}, no longer CONFIGURING; stop waiting"
                break
            fi
            if [[ -n $WAIT_FILE ]]; then
                if [[ $BOOTWATCH_DIR/heartbeat -nt $WAIT_FILE ]]; then
                    ((silent >= WATCH_SILENT)) && log "boot watch back"
                    silent=0
                else
                    silent=$((silent + 1))
                    ((silent == WATCH_SILENT)) && log "boot watch silent for $((JOB_CHECK * WATCH_SILENT)) s; asking Slurm too"
                fi
                write_wait
            fi
        fi
        if ((silent >= WATCH_SILENT && tick >= next)); then  # ask Slurm directly, one booting node at a time
            next=$((tick + DIRECT_TICKS))
            while ((${#WAITING[@]})) && ! booting "$(node_state "${WAITING[0]}")"; do WAITING=("${WAITING[@]:1}"); done
            if ((${#WAITING[@]} == 0)); then
                outcome="nodes $SLURM_JOB_NODELIST up after $((SECONDS - start)) s"
                break
            fi
            [[ -n $WAIT_FILE ]] && write_wait
        fi
        tick=$((tick + 1))
        read -r -t "$WATCH_POLL" -u "$fd" _ || true
    done
    [[ -n $outcome ]] || outcome="gave up after ${WAIT_LIMIT} s; the job starts at slurmctld's next pass"
    log "$outcome"
    [[ -n $WAIT_FILE ]] && rm -f "$WAIT_FILE" "$WAIT_FILE.tmp" "$UP_FILE"
    exec {fd}>&-
    return 0
}

main
exit 0
