#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for tests: 16 nodes x 8 fake GPUs on 127.0.0.1, each
# declared with a LUMI-G node's 56 CPUs and 480 GB (config_overrides: the host has 2 cores), so that
# the LUMI study's own sbatch lines are accepted as written (make rehearse); partitions named like
# LUMI's, slurmdbd accounting on MariaDB, munge authentication.
#   tests/slurm/cluster.sh install | start | stop | status
# Root only (it writes /etc/slurm and starts daemons). Facts: docs/test-cluster.md.
set -euo pipefail

STATE=${RLVR_SLURM_STATE:-/var/lib/rlvr-slurm}
CLUSTER=rlvr
ACCOUNT=${RLVR_SLURM_TEST_ACCOUNT:-rlvr-test}
NODES=16
GPUS=8
CPUS=56
MEMORY_MB=491520
HOST=$(hostname)
HSN_ADDRESS=10.213.0.1
HSN_LABEL=lo:rlvrhsn

log() { echo "slurm-cluster: $*" >&2; }

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null &&
    command -v ip >/dev/null; then
    return
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurmctld slurmd slurm-client slurmdbd munge mariadb-server iproute2 >/dev/null
}

write_config() {
  mkdir -p /etc/slurm "$STATE"/{spool,log,run,gpus,mysql}
  for i in $(seq 0 $((GPUS - 1))); do
    # Slurm drops GPUs without a device file; a clone of /dev/null schedules like a real one.
    [ -c "$STATE/gpus/gpu$i" ] || mknod -m 666 "$STATE/gpus/gpu$i" c 1 3
  done
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=1
MinJobAge=5
KillWait=30
InactiveLimit=0
SlurmdTimeout=30
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=16819
AccountingStorageEnforce=associations
TaskProlog=$STATE/task-prolog.sh
CONF
  # Stands in for Slurm's hpe_slingshot switch plugin, which puts the step's Slingshot credentials into
  # each task's environment (switch_p_job_attach): here one VNI per job step, from the job's and the
  # step's ids (tests/workflow_helpers.py: stand_in_vni reads it back). The lines a TaskProlog prints
  # as "export NAME=value" enter the task's environment.
  cat > "$STATE/task-prolog.sh" <<'PROLOG'
#!/bin/sh
vni=$((1024 + (SLURM_JOB_ID % 4000) * 16 + ${SLURM_STEP_ID:-0} % 16))
echo "export SLINGSHOT_VNIS=$vni"
echo "export SLINGSHOT_SVC_IDS=$((vni % 1000))"
echo "export SLINGSHOT_DEVICES=cxi0"
echo "export SLINGSHOT_TCS=0xa"
PROLOG
  chmod 755 "$STATE/task-prolog.sh"
  for n in $(seq 1 $NODES); do
    echo "NodeName=n$n NodeAddr=127.0.0.1 Port=$((17000 + n)) CPUs=$CPUS RealMemory=$MEMORY_MB Gres=gpu:$GPUS State=UNKNOWN" \
      >> /etc/slurm/slurm.conf
  done
  cat >> /etc/slurm/slurm.conf <<CONF
PartitionName=standard-g Nodes=ALL Default=YES MaxTime=2-00:00:00 State=UP OverSubscribe=EXCLUSIVE
PartitionName=small-g Nodes=ALL MaxTime=3-00:00:00 State=UP
PartitionName=dev-g Nodes=ALL MaxTime=03:00:00 State=UP
CONF
  cat > /etc/slurm/gres.conf <<CONF
AutoDetect=off
NodeName=n[1-$NODES] Name=gpu File=$STATE/gpus/gpu[0-$((GPUS - 1))]
CONF
  cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=16819
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=16820
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
  chmod 600 /etc/slurm/slurmdbd.conf
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq 1 $((seconds * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "timed out waiting for $what"
  return 1
}

start() {
  install_packages
  write_config
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge && chown munge:munge /run/munge
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
  wait_for 10 munge sh -c 'munge -n | unmunge'

  if [ ! -d "$STATE/mysql/mysql" ]; then
    mariadb-install-db --user=mysql --datadir="$STATE/mysql" >/dev/null
  fi
  chown -R mysql:mysql "$STATE/mysql"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  if ! pgrep -x mariadbd >/dev/null; then
    mariadbd --user=mysql --datadir="$STATE/mysql" --bind-address=127.0.0.1 --port=16820 \
      --socket=/run/mysqld/rlvr.sock >"$STATE/log/mariadb.log" 2>&1 &
  fi
  wait_for 30 mariadb mariadb --socket=/run/mysqld/rlvr.sock -e 'select 1'
  mariadb --socket=/run/mysqld/rlvr.sock <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
  pgrep -x slurmdbd >/dev/null || slurmdbd
  wait_for 30 slurmdbd sacctmgr -n list cluster
  sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
  pgrep -x slurmctld >/dev/null || slurmctld
  wait_for 30 slurmctld scontrol ping
  for n in $(seq 1 $NODES); do
    pgrep -f "slurmd -N n$n\$" >/dev/null || slurmd -N "n$n"
  done
  # A second network on the host, named in the ci-slurm site's launch.node_interface as LUMI's
  # Slingshot interface (hsn0) is in lumi.yaml: Ray would not pick this address by itself, so the
  # tests see that every Ray node serves on the interface the site names.
  ip -4 addr show dev lo | grep -q "$HSN_ADDRESS/32" ||
    ip addr add "$HSN_ADDRESS/32" dev lo label "$HSN_LABEL"
  sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" >/dev/null 2>&1 || true
  sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" >/dev/null 2>&1 || true
  # ReturnToService=1 keeps a node that was set DOWN down (the nodes-down test relies on it), so a node
  # left down or drained by an earlier run of the tests is resumed here.
  wait_for 60 "$NODES idle nodes" sh -c "scontrol update nodename=n[1-$NODES] state=resume >/dev/null 2>&1;
    [ \$(sinfo -h -p standard-g -t idle -o %D) = $NODES ]"
  log "up: $NODES nodes x $GPUS GPUs, partitions standard-g small-g dev-g, account $ACCOUNT"
}

stop() {
  scancel --full --quiet -u root 2>/dev/null || true
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  pkill -x slurmdbd 2>/dev/null || true
  pkill -x mariadbd 2>/dev/null || true
  for _ in $(seq 1 50); do
    # One name per pgrep: it matches at most 15 characters of a process name.
    running=0
    for daemon in slurmd slurmctld slurmdbd mariadbd; do
      pgrep -x "$daemon" >/dev/null && running=1
    done
    [ "$running" = 1 ] || break
    sleep 0.2
  done
  log "stopped"
}

case "${1:-}" in
  install) install_packages ;;
  start) start ;;
  stop) stop ;;
  status) sinfo && squeue ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
