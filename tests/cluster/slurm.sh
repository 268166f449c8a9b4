#!/usr/bin/env bash
# A single-node SLURM cluster (Debian's Slurm with munge, and slurmdbd on MariaDB for accounting)
# for the tests in tests/cluster/ and for trying `posenc sweep --launcher submitit_slurm` locally.
#
#   tests/cluster/slurm.sh up       install what is missing, start the daemons, wait for the node
#   tests/cluster/slurm.sh status   exit 0 when every daemon it started runs and the node answers
#   tests/cluster/slurm.sh down     stop the daemons it started (by their pid files)
#
# Run as root. All state (configs, keys, database, spool, logs, pid files) lives in
# $POSENC_SLURM_DIR (default: $TMPDIR/posenc-slurm, or /tmp/posenc-slurm); `up` writes
# $POSENC_SLURM_DIR/env, which sets SLURM_CONF for the clients: `source` it before sbatch,
# sinfo or posenc. `up` first stops what an earlier run left, so it can always be run again.
# Without systemd or cgroups, the node tracks processes with proctrack/linuxproc and task/none.
set -euo pipefail

STATE="${POSENC_SLURM_DIR:-${TMPDIR:-/tmp}/posenc-slurm}"
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
DAEMONS=(slurmd slurmctld slurmdbd mariadbd munged)  # stopped in this order
CLUSTER=posenc
DB_PORT="${POSENC_SLURM_DB_PORT:-6820}"

log() { echo "slurm.sh: $*" >&2; }

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return
  log "installing ${missing[*]}"
  # no package may start its service: this script starts its own daemons, on its own state
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ "$made_policy" -eq 1 ] && rm -f "$policy"
  return 0
}

alive() {  # alive NAME: its pid file names a running process
  local pid
  pid="$(cat "$STATE/run/$1.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

stop_all() {
  local name pid i
  for name in "${DAEMONS[@]}"; do
    alive "$name" || { rm -f "$STATE/run/$name.pid"; continue; }
    pid="$(cat "$STATE/run/$name.pid")"
    kill "$pid" 2>/dev/null || true
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    rm -f "$STATE/run/$name.pid"
  done
}

wait_for() {  # wait_for WHAT SECONDS COMMAND...: retry COMMAND until it succeeds
  local what="$1" seconds="$2"
  local end=$((SECONDS + seconds))
  shift 2
  while [ "$SECONDS" -lt "$end" ]; do
    timeout 5 "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  log "$what did not come up in ${seconds} s; logs in $STATE/log"
  tail -n 5 "$STATE"/log/*.log >&2 || true
  return 1
}

write_configs() {
  local host cpus mem_mb
  host="$(hostname -s)"
  cpus="$(nproc)"
  mem_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10))
  cat >"$STATE/etc/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job waits cred_expire seconds, then a scheduler pass (120 s and 60 s by default)
AuthInfo=socket=$STATE/munge/munge.socket,cred_expire=5
SchedulerParameters=sched_interval=2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# without accounting, sacct fails and submitit never learns that a job failed
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePass=$STATE/munge/munge.socket
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=30
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$STATE/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$STATE/etc/slurmdbd.conf"
  cat >"$STATE/etc/db-init.sql" <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
  echo "export SLURM_CONF=$STATE/etc/slurm.conf" >"$STATE/env"
}

up() {
  install_missing
  stop_all
  rm -rf "$STATE"
  mkdir -p "$STATE"/{etc,run,log,ctld,spool,munge,db}
  chmod 755 "$STATE"
  chown munge:munge "$STATE/run" "$STATE/log"  # munged runs as the munge user; root writes anyway
  write_configs
  export SLURM_CONF="$STATE/etc/slurm.conf"

  dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$STATE/munge/munge.key"
  chown -R munge:munge "$STATE/munge"
  chmod 755 "$STATE/munge"  # clients reach the socket in it
  runuser -u munge -- munged --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
    --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/seed"
  wait_for munged 10 munge -S "$STATE/munge/munge.socket" -n

  mariadb-install-db --no-defaults --user=root --datadir="$STATE/db" --skip-test-db \
    --auth-root-authentication-method=socket >"$STATE/log/mariadb-install.log" 2>&1
  setsid mariadbd --no-defaults --user=root --datadir="$STATE/db" --socket="$STATE/run/mariadb.sock" \
    --pid-file="$STATE/run/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
    --init-file="$STATE/etc/db-init.sql" --log-error="$STATE/log/mariadb.log" \
    --innodb-buffer-pool-size=64M --innodb-log-file-size=16M </dev/null >/dev/null 2>&1 &
  wait_for mariadb 60 bash -c "exec 3<>/dev/tcp/127.0.0.1/$DB_PORT"

  slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
  wait_for slurmdbd 60 sacctmgr -i add cluster "$CLUSTER"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  wait_for "the node" 60 sh -c 'sinfo -h -o %t | grep -q idle'
  log "up: state in $STATE; clients need: source $STATE/env"
  echo "$STATE/env"
}

status() {
  local name
  for name in "${DAEMONS[@]}"; do
    alive "$name" || { log "$name is not running (state: $STATE)"; return 1; }
  done
  SLURM_CONF="$STATE/etc/slurm.conf" sinfo -h -o '%P %t %c' >&2
}

case "${1:-}" in
  up) up ;;
  down) stop_all; log "down (state left in $STATE)" ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
