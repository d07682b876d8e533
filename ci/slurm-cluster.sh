#!/usr/bin/env bash
# ci/slurm-cluster.sh -- a real, single-node SLURM cluster on 127.0.0.1 for villani's CI.
#
#   ci/slurm-cluster.sh install   apt packages (munge slurmctld slurmd slurm-client); idempotent
#   ci/slurm-cluster.sh start     fresh state, munged + slurmctld + slurmd, wait until the node
#                                 is idle, print sinfo. Fails (exit 1, log tails) if it isn't.
#   ci/slurm-cluster.sh stop      scancel leftover jobs, stop the daemons by pidfile. Always exit 0.
#   ci/slurm-cluster.sh status    daemons + sinfo/squeue; exit 0 only if the node answers.
#   ci/slurm-cluster.sh smoke     srun + sbatch round trip (a few seconds).
#
# Debian 12 packages (slurm-wlm 22.05, munge 0.5.15), root, no systemd: every daemon forks and
# writes a pidfile; we never kill by name.  The node advertises fake A100s (GRES gpu:a100,
# gres.conf File=/dev/null, /dev/zero) so the real profile's `--gres=gpu:a100:1` is
# accepted as-is, and two GPU jobs can run at once on a 2-CPU machine.
# No accounting daemon: `sacct` does not work here, so the CI Snakemake profile must use
# `slurm-status-command: squeue` (tests/profiles/ci-slurm/config.yaml).
#
# Environment knobs (defaults in brackets):
#   VILLANI_SLURM_STATE   state dir, wiped on every start          [/var/lib/villani-slurm]
#   VILLANI_SLURM_LOGDIR  daemon logs                               [/var/log/slurm]
#   VILLANI_SLURM_CPUS    CPUs of the node                          [nproc]
#   VILLANI_SLURM_MEM_MB  RealMemory of the node                    [85% of `slurmd -C`]
#   VILLANI_SLURM_WAIT_S  readiness timeout per daemon, seconds     [60]
#   VILLANI_SLURM_GPUS    fake A100s on the node, 1..4              [2: two GPU jobs at once]
set -euo pipefail

STATE="${VILLANI_SLURM_STATE:-/var/lib/villani-slurm}"
LOGDIR="${VILLANI_SLURM_LOGDIR:-/var/log/slurm}"
WAIT_S="${VILLANI_SLURM_WAIT_S:-60}"
CONF_DIR=/etc/slurm
NODE="$(hostname -s)"
PARTITION=debug

PID_MUNGE=/run/munge/munged.pid
PID_CTLD=/run/slurmctld.pid
PID_SLURMD=/run/slurmd.pid

say() { printf '[slurm-cluster] %s\n' "$*" >&2; }

# wait_until <seconds> <command...>: poll the command (each probe itself bounded, since
# slurm clients retry for ~10 s against a dead controller) until it succeeds.
wait_until() {
  local secs=$1; shift
  timeout -k 5 "$secs" bash -c '
    until timeout -k 2 10 "$@" >/dev/null 2>&1; do sleep 0.25; done' _ "$@"
}

pid_of() { [[ -s $1 ]] && cat "$1"; }
alive() { local p; p=$(pid_of "$1") && kill -0 "$p" 2>/dev/null; }

# stop_by_pidfile <pidfile> <name>: TERM, wait up to 30 s, then KILL -- only that PID.
stop_by_pidfile() {
  local f=$1 name=$2 p
  if alive "$f"; then
    p=$(pid_of "$f")
    say "stopping $name (pid $p)"
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 120); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$p" 2>/dev/null; then
      say "$name ignored SIGTERM for 30 s, SIGKILL"
      kill -KILL "$p" 2>/dev/null || true
    fi
  fi
  rm -f "$f"
}

node_idle() { [[ $(sinfo -h -n "$NODE" -o %t 2>/dev/null) == idle ]]; }

cmd_install() {
  local pkgs=(munge slurmctld slurmd slurm-client) missing=() p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    say "already installed: ${pkgs[*]} ($(dpkg-query -W -f='${Version}' slurmctld))"
    return 0
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # --no-install-recommends: the slurm-wlm recommends pull ~40 unneeded packages.
  timeout -k 10 600 apt-get update -q
  timeout -k 10 900 apt-get install -y -q --no-install-recommends "${pkgs[@]}"
}

node_mem_mb() {
  if [[ -n ${VILLANI_SLURM_MEM_MB:-} ]]; then echo "$VILLANI_SLURM_MEM_MB"; return; fi
  local real
  real=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1)
  [[ -n $real ]] || real=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
  # Leave headroom for the daemons and the test process itself; never above what slurmd
  # detects (a node configured with more memory than it reports is drained).
  echo $((real * 85 / 100))
}

write_config() {
  local cpus mem gpus gpu_files
  cpus="${VILLANI_SLURM_CPUS:-$(nproc)}"
  mem=$(node_mem_mb)
  gpus="${VILLANI_SLURM_GPUS:-2}"

  install -d -m 0755 "$CONF_DIR"
  install -d -o slurm -g slurm -m 0755 "$STATE/ctld" "$LOGDIR"
  install -d -o root -g root -m 0755 "$STATE/slurmd"
  # Fresh state: slurmctld persists node state (a DRAIN survives restarts) and job ids.
  rm -rf "${STATE:?}/ctld/"* "${STATE:?}/slurmd/"*
  # Each GPU of a GRES needs its own device file, or slurmd counts 0 GPUs and drains the
  # node. Nothing opens them here (no cgroup device constraint); distinct character
  # devices give distinct indices (CUDA_VISIBLE_DEVICES=0, 1, ...).
  local devs=(/dev/null /dev/zero /dev/full /dev/urandom)
  ((gpus >= 1 && gpus <= ${#devs[@]})) || { say "VILLANI_SLURM_GPUS must be 1..${#devs[@]}"; exit 2; }
  gpu_files=("${devs[@]:0:gpus}")
  [[ -s /etc/munge/munge.key ]] || /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 0600 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge

  cat > "$CONF_DIR/slurm.conf" <<EOF
# Generated by villani ci/slurm-cluster.sh -- single node on loopback, no accounting.
ClusterName=villani-ci
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
# Reject jobs that can never fit (else they pend forever and snakemake waits forever).
EnforcePartLimits=ALL
# squeue-based status checks and the tests read finished jobs: keep them listed for 1 h.
MinJobAge=3600
SlurmctldPidFile=${PID_CTLD}
SlurmdPidFile=${PID_SLURMD}
StateSaveLocation=${STATE}/ctld
SlurmdSpoolDir=${STATE}/slurmd
SlurmctldLogFile=${LOGDIR}/slurmctld.log
SlurmdLogFile=${LOGDIR}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${cpus} Sockets=1 CoresPerSocket=${cpus} ThreadsPerCore=1 RealMemory=${mem} Gres=gpu:a100:${gpus} State=UNKNOWN
# A job without --mem would otherwise get the whole node's memory and run alone.
PartitionName=${PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE DefMemPerCPU=500 State=UP
EOF
  local f
  for f in "${gpu_files[@]}"; do
    echo "NodeName=${NODE} Name=gpu Type=a100 File=${f}"
  done > "$CONF_DIR/gres.conf"
  say "config: node ${NODE} CPUs=${cpus} RealMemory=${mem} Gres=gpu:a100:${gpus} partition=${PARTITION}"
}

dump_logs() {
  local f
  for f in "$LOGDIR/slurmctld.log" "$LOGDIR/slurmd.log"; do
    [[ -f $f ]] && { say "--- tail $f"; tail -n 25 "$f" >&2; }
  done
  sinfo -R 2>/dev/null >&2 || true
}

fail_start() { say "START FAILED: $*"; dump_logs; stop_daemons; exit 1; }

stop_daemons() {
  stop_by_pidfile "$PID_SLURMD" slurmd
  stop_by_pidfile "$PID_CTLD" slurmctld
  stop_by_pidfile "$PID_MUNGE" munged
}

cmd_start() {
  local t0=$SECONDS
  command -v slurmctld >/dev/null || { say "SLURM not installed: run '$0 install' first"; exit 1; }
  stop_daemons            # our own leftovers from an earlier start
  write_config
  : > "$LOGDIR/slurmctld.log"; : > "$LOGDIR/slurmd.log"

  runuser -u munge -- /usr/sbin/munged
  wait_until 15 bash -c 'munge -n | unmunge' || fail_start "munged did not answer"

  /usr/sbin/slurmctld     # drops to SlurmUser, forks, writes its pidfile
  wait_until "$WAIT_S" scontrol ping || fail_start "slurmctld did not answer 'scontrol ping'"
  /usr/sbin/slurmd
  wait_until "$WAIT_S" bash -c "[[ \$(sinfo -h -n '$NODE' -o %t) == idle ]]" \
    || fail_start "node $NODE did not become idle within ${WAIT_S}s"

  say "cluster up in $((SECONDS - t0))s"
  sinfo -o '%P %a %l %D %t %N %c %m %G'
}

# Processes of jobs that outlived their job (a scancelled step that ignored SIGTERM is
# reparented away from slurmstepd; proctrack/linuxproc then loses it): they carry
# SLURM_JOB_ID in their environment and would keep running into the next cluster.
kill_job_leftovers() {
  local e pid n=0
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    if tr '\0' '\n' 2>/dev/null < "$e" | grep -q '^SLURM_JOB_ID='; then
      kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
    fi
  done
  ((n == 0)) || say "killed $n leftover job process(es)"
}

cmd_stop() {
  set +e
  if alive "$PID_CTLD"; then
    local jobs
    jobs=$(timeout -k 2 15 squeue -h -o %A 2>/dev/null)
    if [[ -n $jobs ]]; then
      say "cancelling leftover jobs: $(echo $jobs)"
      # shellcheck disable=SC2086
      timeout -k 2 15 scancel $jobs
      wait_until 60 bash -c '[[ -z $(squeue -h -o %A) ]]' || say "jobs still listed after 60 s"
    fi
  fi
  stop_daemons
  kill_job_leftovers
  say "stopped"
  return 0
}

cmd_status() {
  local f name rc=0
  for f in "$PID_MUNGE:munged" "$PID_CTLD:slurmctld" "$PID_SLURMD:slurmd"; do
    name=${f#*:}; f=${f%%:*}
    if alive "$f"; then echo "$name: running (pid $(pid_of "$f"))"; else echo "$name: not running"; rc=1; fi
  done
  if ((rc == 0)); then
    timeout -k 2 15 sinfo -o '%P %a %l %D %t %N %c %m %G' || rc=1
    timeout -k 2 15 squeue -o '%i %j %T %M %R' || rc=1
    node_idle || [[ $(sinfo -h -n "$NODE" -o %t 2>/dev/null) =~ ^(mix|alloc)$ ]] || rc=1
  fi
  return $rc
}

cmd_smoke() {
  local out jid st=""
  out=$(timeout -k 5 60 srun -n1 hostname) || { say "srun failed"; return 1; }
  [[ $out == "$NODE" ]] || { say "srun printed '$out', expected '$NODE'"; return 1; }
  jid=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --wrap 'test -n "$CUDA_VISIBLE_DEVICES"')
  for _ in $(seq 1 240); do
    st=$(squeue -h -j "$jid" -t all -o %T 2>/dev/null || true)
    [[ $st == COMPLETED || $st == FAILED ]] && break
    sleep 0.25
  done
  [[ $st == COMPLETED ]] || { say "smoke job $jid ended '$st'"; return 1; }
  say "smoke ok: srun + sbatch --gres=gpu:a100:1 (job $jid)"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  smoke) cmd_smoke ;;
  *) echo "usage: $0 install|start|stop|status|smoke" >&2; exit 2 ;;
esac
