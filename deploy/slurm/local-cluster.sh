#!/usr/bin/env bash
# Bring up / tear down a real single-node Slurm cluster on this machine, for tests.
#
# Usage: deploy/slurm/local-cluster.sh up|down|status
#
#   up      Install slurmctld, slurmd, slurm-client and munge from Debian if
#           missing, write /etc/slurm/slurm.conf for this host, start munged,
#           slurmctld and slurmd as plain daemons (no systemd needed) and wait
#           until the node is idle. Idempotent.
#   down    Cancel all jobs, stop the daemons this script started (by pid
#           file), remove the state directory and the config files it wrote.
#           Idempotent. Logs are kept.
#   status  Print sinfo; exit 1 when the cluster is down.
#
# After `up`, plain srun/sbatch/salloc work (as root too): `srun -n 4 hostname`.
# The node advertises more CPUs than the machine has (HEDDLE_SLURM_CPUS,
# default 16) so multi-task steps and several jobs fit on a 2-core box.
#
# Environment (optional): HEDDLE_SLURM_CPUS (16), HEDDLE_SLURM_WAIT (60 s),
# HEDDLE_SLURM_STATE (/var/lib/heddle-slurm), HEDDLE_SLURM_LOGS (/var/log/heddle-slurm).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "local-cluster: need root (no sudo found)" >&2; exit 1; }
    exec sudo --preserve-env=HEDDLE_SLURM_CPUS,HEDDLE_SLURM_WAIT,HEDDLE_SLURM_STATE,HEDDLE_SLURM_LOGS \
        bash "${BASH_SOURCE[0]}" "$@"
fi

STATE=${HEDDLE_SLURM_STATE:-/var/lib/heddle-slurm}
LOGS=${HEDDLE_SLURM_LOGS:-/var/log/heddle-slurm}
CPUS=${HEDDLE_SLURM_CPUS:-16}
WAIT=${HEDDLE_SLURM_WAIT:-60}
CONF=/etc/slurm/slurm.conf
CGCONF=/etc/slurm/cgroup.conf
MARKER="# Written by heddle deploy/slurm/local-cluster.sh; 'down' removes it."
HOST=$(hostname -s)

log() { echo "local-cluster: $*"; }
die() { echo "local-cluster: error: $*" >&2; exit 1; }

# True when the pid file exists and names a live process.
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# True when the file is absent or was written by this script.
ours() { [ ! -e "$1" ] || grep -qxF "$MARKER" "$1"; }

install_packages() {
    local bin missing=0
    for bin in slurmctld slurmd srun sinfo munged munge; do
        command -v "$bin" >/dev/null || missing=1
    done
    [ "$missing" -eq 0 ] && return 0
    log "installing slurmctld slurmd slurm-client munge from Debian"
    # Keep the packages' init scripts from starting daemons on their own.
    local guard=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        guard=1
    fi
    local rc=0
    apt-get update -qq || rc=$?
    [ "$rc" -eq 0 ] && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null || rc=$?; }
    if [ "$guard" -eq 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
    [ "$rc" -eq 0 ] || die "apt-get failed (exit $rc)"
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 0700 /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0 # a munged is already serving the default socket
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- munged
    local i
    for i in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        [ "$i" -eq 50 ] && die "munged did not start; see /var/log/munge/munged.log"
        sleep 0.1
    done
    cp /run/munge/munged.pid "$STATE/munged.pid"
}

write_conf() {
    ours "$CONF" || die "$CONF exists and was not written by this script; refusing to touch it"
    ours "$CGCONF" || die "$CGCONF exists and was not written by this script; refusing to touch it"
    local mem
    mem=$(free -m | awk '/^Mem:/ { print int($2 * 0.9) }')
    install -d -m 0755 /etc/slurm
    cat >"$CONF" <<EOF
$MARKER
# Single-node test cluster on $HOST; works without systemd or cgroup controllers.
ClusterName=heddle
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Trust the node line below rather than the hardware (CPUs > nproc on purpose).
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=60
# Reject impossible requests (e.g. srun -n 17 with CPUs=16) instead of queueing forever.
EnforcePartLimits=ALL
MailProg=/bin/true
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    chmod 0644 "$CONF"
}

node_state() { timeout 10 sinfo -h -N -n "$HOST" -o %T 2>/dev/null | head -n1; }

up() {
    if alive "$STATE/slurmctld.pid" && alive "$STATE/slurmd.pid" &&
        [[ "$(node_state)" =~ ^(idle|mixed|allocated|completing) ]]; then
        log "already up"
        report
        return 0
    fi
    install_packages
    # Something half-started from an earlier run: start clean.
    if alive "$STATE/slurmctld.pid" || alive "$STATE/slurmd.pid"; then stop_slurm; fi
    install -d -m 0700 "$STATE" "$STATE/slurmctld" "$STATE/slurmd"
    install -d -m 0755 "$LOGS"
    write_conf
    start_munge
    log "starting slurmctld and slurmd"
    slurmctld -i
    slurmd
    local i state=""
    for ((i = 0; i < WAIT * 2; i++)); do
        state=$(node_state)
        case "$state" in
        idle) break ;;
        down* | drain*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 0.5
    done
    if [ "$state" != idle ]; then
        echo "local-cluster: error: node $HOST not idle after ${WAIT}s (state: '${state:-none}')" >&2
        tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmd.log" >&2 || true
        echo "local-cluster: daemons left running for inspection; '$0 down' cleans up" >&2
        exit 1
    fi
    report
}

report() {
    log "config: $CONF; state: $STATE; logs: $LOGS/slurmctld.log $LOGS/slurmd.log"
    timeout 10 sinfo
}

# Stop one daemon by pid file: TERM, then KILL after 10 s.
stop_pid() {
    local f=$1 pid i
    alive "$f" || { rm -f "$f"; return 0; }
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        [ "$i" -eq 100 ] && kill -KILL "$pid" 2>/dev/null
        sleep 0.1
    done
    rm -f "$f"
}

stop_slurm() {
    if alive "$STATE/slurmctld.pid"; then
        local jobs i
        jobs=$(timeout 10 squeue -h -o %A 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            log "cancelling jobs: $(echo "$jobs" | tr '\n' ' ')"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for i in $(seq 20); do
                [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ] && break
                sleep 0.5
            done
        fi
    fi
    stop_pid "$STATE/slurmd.pid"
    stop_pid "$STATE/slurmctld.pid"
    # Job step daemons outlive slurmd; with our config in place they are ours.
    if grep -qxF "$MARKER" "$CONF" 2>/dev/null; then
        local pid
        for pid in $(pgrep -x slurmstepd || true); do kill -KILL "$pid" 2>/dev/null || true; done
    fi
}

down() {
    stop_slurm
    stop_pid "$STATE/munged.pid"
    rm -rf "$STATE"
    local f
    for f in "$CONF" "$CGCONF"; do
        if [ -e "$f" ] && ours "$f"; then rm -f "$f"; fi
    done
    log "down (logs kept in $LOGS)"
}

status() {
    if [ -e "$CONF" ] && alive "$STATE/slurmctld.pid" && timeout 10 sinfo; then
        return 0
    fi
    log "down"
    return 1
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
