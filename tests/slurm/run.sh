#!/usr/bin/env bash
# make test-slurm: gmiexp on a real single-host Slurm (Debian's slurm-wlm 22.05, accounting through slurmdbd +
# MariaDB, munge), every daemon on loopback, started here by hand and stopped by the pids it started.
# Runs the README's sbatch script, a 2-member hydra/launcher=gmiexp_slurm sweep, a sweep with a failing member
# (FAILED in sacct, sweep exit 1), tasks_per_node=2 with launch.nnodes=1 (exit 2), a member's bad input refused
# before anything is queued (exit 2), scontrol requeue with resume,
# and a PBT population requeued as one job. Root and apt-get install what is missing. Not in the default suite:
# it takes minutes.
#   PY=<python with gmiexp> bash tests/slurm/run.sh        (KEEP=1 keeps the work dir)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-python3}
HOST=$(hostname -s)
WORK=$(mktemp -d /tmp/gmiexp-test-slurm.XXXXXX)
export SLURM_CONF=$WORK/etc/slurm.conf
export PYTHONPATH="$ROOT/tests/helpers${PYTHONPATH:+:$PYTHONPATH}"
export WANDB_MODE=offline
PORT0=${SLURM_TEST_PORT:-16817}  # slurmctld, slurmd, slurmdbd, mariadb: PORT0..PORT0+3
PIDS=()
FAILS=0
SIZES=(hardware=cpu task=Cartpole num_gpus=1 gmis_per_gpu=1 num_envs=16 train.horizon_length=8
       train.minibatch_size=64 train.mini_epochs=1 launch.progress=false)

say() { echo "test-slurm: $*"; }
check() {  # check <what> <command...>: one line per check, the run goes on
  local what=$1; shift
  if "$@"; then say "PASS $what"; else say "FAIL $what"; FAILS=$((FAILS + 1)); fi
}
stop_daemons() {
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    local pid=${PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  say "stopped daemons (pids ${PIDS[*]:-none})"
  if [ "${KEEP:-0}" = 1 ]; then say "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap stop_daemons EXIT
start() {  # start <name> <command...>: a daemon in the foreground of a background job; its pid is ours
  local name=$1; shift
  "$@" >"$WORK/log/$name.out" 2>&1 &
  PIDS+=($!)
  say "started $name (pid $!)"
}
wait_for() {  # wait_for <seconds> <what> <command...>
  local t=$1 what=$2; shift 2
  for _ in $(seq $((t * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  say "timed out waiting for $what"; return 1
}

# ---- install what is missing (Debian packages, as root) ----
need=()
for exe in slurmctld slurmd slurmdbd sbatch sacct munged mariadbd; do
  command -v "$exe" >/dev/null || PATH=$PATH:/usr/sbin command -v "$exe" >/dev/null || need+=("$exe")
done
export PATH=$PATH:/usr/sbin
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { say "missing ${need[*]}: run as root to apt-get install them"; exit 2; }
  say "installing slurm-wlm slurmdbd munge mariadb-server (missing: ${need[*]})"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurm-wlm slurmdbd munge mariadb-server slurm-client || { say "apt-get install failed"; exit 1; }
fi
[ "$(id -u)" = 0 ] || { say "the daemons run as root here (SlurmUser=root); run as root"; exit 2; }

# ---- configuration ----
mkdir -p "$WORK"/{etc,log,state,spool,munge,db,runs}
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 700 "$WORK/munge"; chmod 400 "$WORK/munge/munge.key"
# munge's default socket: Slurm's clients (sacctmgr, sacct) reach slurmdbd with it whatever AuthInfo says
SOCK=/run/munge/munge.socket.2
cat >"$SLURM_CONF" <<EOF
ClusterName=gmiexp
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT0
SlurmdPort=$((PORT0 + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((PORT0 + 2))
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=10
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$WORK/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$((PORT0 + 2))
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((PORT0 + 3))
StorageUser=root
StorageLoc=slurm_acct_db
LogFile=$WORK/log/slurmdbd.log
PidFile=$WORK/slurmdbd.pid
EOF
chmod 600 "$WORK/etc/slurmdbd.conf"

# ---- daemons ----
mariadb-install-db --user=root --datadir="$WORK/db" --auth-root-authentication-method=normal \
  >"$WORK/log/mariadb-install.out" 2>&1 || { say "mariadb-install-db failed"; cat "$WORK/log/mariadb-install.out"; exit 1; }
start mariadbd mariadbd --no-defaults --user=root --datadir="$WORK/db" --bind-address=127.0.0.1 \
  --port=$((PORT0 + 3)) --socket="$WORK/mysqld.sock" --pid-file="$WORK/mysqld.pid" --skip-grant-tables \
  --log-error="$WORK/log/mariadbd.log"
if munge -n >/dev/null 2>&1; then
  say "using the munged already serving $SOCK (not ours: left running)"
else
  mkdir -p /run/munge
  start munged munged -F --force --socket="$SOCK" --key-file="$WORK/munge/munge.key" \
    --pid-file="$WORK/munge/munged.pid" --seed-file="$WORK/munge/seed" --log-file="$WORK/log/munged.log"
fi
wait_for 30 mariadb bash -c "echo > /dev/tcp/127.0.0.1/$((PORT0 + 3))" || exit 1
wait_for 10 munge test -S "$SOCK" || exit 1
start slurmdbd slurmdbd -D
wait_for 60 slurmdbd sacctmgr -i list cluster || { tail -20 "$WORK/log/slurmdbd.log"; exit 1; }
sacctmgr -i add cluster gmiexp >/dev/null 2>&1
start slurmctld slurmctld -D -c
start slurmd slurmd -D
wait_for 60 "node $HOST idle" bash -c "sinfo -h -n $HOST -o %T | grep -qx idle" || { tail -20 "$WORK/log/slurmctld.log"; exit 1; }
sinfo
say "cluster up: $(sinfo -h -o '%P %D %T %C')"

state_of() { sacct -n -X -P -j "$1" -o State | head -1; }
job_done() { case $(state_of "$1") in COMPLETED|FAILED|CANCELLED*|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL) return 0;; *) return 1;; esac; }
sacct_rows() { sacct -n -X -P -S now-1hour -o JobID,JobName,State,ExitCode --name "$1"; }

# ---- 1. the README's sbatch script (one node, no GPUs, tiny) ----
cat >"$WORK/runs/job.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=gmiexp-sbatch
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --signal=B:USR2@120
#SBATCH --output=$WORK/runs/%x-%j.log

HEAD=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n1)
trap 'scontrol requeue "\$SLURM_JOB_ID"' USR2
srun $PY -m gmiexp ${SIZES[*]} max_iterations=\${ITERS:-2} train.save_frequency=1 \\
    launch.nnodes="\$SLURM_NNODES" hydra.run.dir=$WORK/runs/sbatch/"\$SLURM_JOB_ID" &
wait \$!  # srun's exit status is the job's (a bare wait returns 0: a failed run would end COMPLETED)
EOF
say "1. sbatch script"
JOB=$(sbatch --parsable "$WORK/runs/job.sh")
wait_for 300 "job $JOB" job_done "$JOB"
check "sbatch job $JOB COMPLETED ($(state_of "$JOB"))" test "$(state_of "$JOB")" = COMPLETED
check "its run wrote summary.json ok" grep -q '"status": "ok"' "$WORK/runs/sbatch/$JOB/summary.json"
tail -n 2 "$WORK/runs/gmiexp-sbatch-$JOB.log"
JOB=$(sbatch --parsable --export=ALL,ITERS=0 "$WORK/runs/job.sh")  # max_iterations=0: refused, exit 2
wait_for 120 "job $JOB" job_done "$JOB"
check "an sbatch job whose run failed ends FAILED ($(state_of "$JOB"), exit $(sacct -n -X -P -j "$JOB" -o ExitCode))" \
  test "$(state_of "$JOB")" = FAILED
tail -n 2 "$WORK/runs/gmiexp-sbatch-$JOB.log"

# ---- 2. a 2-member gmiexp_slurm sweep ----
say "2. hydra/launcher=gmiexp_slurm sweep seed=1,2"
OUT=$WORK/runs/sweep.out
$PY -m gmiexp -m hydra/launcher=gmiexp_slurm hydra.launcher.cpus_per_task=1 hydra.launcher.timeout_min=20 \
  experiment=slurm_sweep "${SIZES[@]}" max_iterations=2 seed=1,2 hydra.sweep.dir="$WORK/runs/sweep" >"$OUT" 2>&1
rc=$?
cat "$OUT"
check "sweep exit 0 (got $rc)" test $rc = 0
check "both members' summaries ok" bash -c "grep -q '\"status\": \"ok\"' $WORK/runs/sweep/0/summary.json && grep -q '\"status\": \"ok\"' $WORK/runs/sweep/1/summary.json"
check "the sweep's output shows both members' one-line summaries" bash -c "grep -q '^\[#0\] gmiexp ok' $OUT && grep -q '^\[#1\] gmiexp ok' $OUT"
all_completed() { [ "$(sacct -n -X -P -o State --name "$1" | grep -c COMPLETED)" = "$2" ]; }
check "jobs named gmiexp-slurm_sweep, both COMPLETED in sacct" wait_for 60 "sacct" all_completed gmiexp-slurm_sweep 2
sacct_rows gmiexp-slurm_sweep

# ---- 3. a failing member ----
say "3. a sweep with a failing member (role=ppo,user_roles:FailRole)"
OUT=$WORK/runs/fail.out
$PY -m gmiexp -m hydra/launcher=gmiexp_slurm hydra.launcher.cpus_per_task=1 hydra.launcher.timeout_min=20 \
  experiment=slurm_fail "${SIZES[@]}" max_iterations=2 role=ppo,user_roles:FailRole \
  hydra.sweep.dir="$WORK/runs/fail" >"$OUT" 2>&1
rc=$?
cat "$OUT"
check "sweep exit 1 (got $rc)" test $rc = 1
check "the failed member is named" grep -q "1 multirun job(s) failed: $WORK/runs/fail/1" "$OUT"
one_failed() { sacct -n -X -P -o JobID,State --name gmiexp-slurm_fail | sort | awk -F'|' '{print $2}' | tr '\n' ' ' \
  | grep -qx 'COMPLETED FAILED '; }
check "member 0 COMPLETED, the failed member 1 FAILED in sacct" wait_for 60 "sacct" one_failed
sacct_rows gmiexp-slurm_fail
check "its log says the job triggered an exception, not 'completed successfully'" bash -c \
  "grep -l 'FailRole fails on purpose' $WORK/runs/fail/.submitit/*/*_log.err | xargs grep -L 'Job completed successfully' | xargs grep -l 'Submitted job triggered an exception' | grep -q ."

# ---- 4. tasks_per_node=2 with launch.nnodes=1 is refused ----
say "4. hydra.launcher.tasks_per_node=2 with launch.nnodes=1"
OUT=$WORK/runs/tasks2.out
$PY -m gmiexp -m hydra/launcher=gmiexp_slurm hydra.launcher.tasks_per_node=2 hydra.launcher.cpus_per_task=1 \
  experiment=slurm_tasks2 "${SIZES[@]}" max_iterations=2 seed=1 hydra.sweep.dir="$WORK/runs/tasks2" >"$OUT" 2>&1
rc=$?
tail -n 3 "$OUT"
check "sweep exit 2 (got $rc)" test $rc = 2
check "the task says why" bash -c "grep -h 'invalid Slurm step: 2 tasks' $WORK/runs/tasks2/.submitit/*/*_log.err | head -1 | grep ."
check "nothing trained" test ! -e "$WORK/runs/tasks2/0/summary.json"

# ---- 4b. a member's bad input is refused before anything is queued ----
# refused_sweep NAME PATTERN OVERRIDES...: a 2-member sweep whose member #1 is bad input exits 2 naming it (PATTERN,
# a grep regex), with nothing queued and no sweep dir left
refused_sweep() {
  local name=$1 pattern=$2 out=$WORK/runs/$1.out rc
  shift 2
  $PY -m gmiexp -m hydra/launcher=gmiexp_slurm hydra.launcher.cpus_per_task=1 experiment=slurm_bad "${SIZES[@]}" \
    max_iterations=2 "$@" hydra.sweep.dir="$WORK/runs/$name" >"$out" 2>&1
  rc=$?
  cat "$out"
  check "sweep exit 2 (got $rc)" test $rc = 2
  check "the reason named with its member" grep -q "$pattern" "$out"
  check "no job queued or run (sacct has no gmiexp-slurm_bad)" test -z "$(sacct -n -X -P -o JobID --name gmiexp-slurm_bad)"
  check "no sweep dir left" test ! -e "$WORK/runs/$name"
}
say "4b. a sweep with a member whose config is bad input (train.gamma=0.99,2)"
refused_sweep bad 'invalid train.gamma: 2.0; valid: 0..1 (member #1; nothing was submitted)' train.gamma=0.99,2
say "4c. a sweep whose member only a plan refused before (launch.reshape=off,auto with launch.inprocess=true)"
refused_sweep bad_plan 'invalid launch.reshape=auto with launch.inprocess=true: .*(member #1; nothing was submitted)' \
  launch.inprocess=true launch.reshape=off,auto

# ---- 5. scontrol requeue, then resume ----
say "5. scontrol requeue and resume"
JOB=$(sbatch --parsable --export=ALL,ITERS=60 "$WORK/runs/job.sh")
RUN=$WORK/runs/sbatch/$JOB
wait_for 300 "a checkpoint of epoch >= 3" bash -c "ls $RUN/rl_games/*/nn/ 2>/dev/null | grep -qE '_ep_([3-9]|[1-9][0-9]+)_'"
say "requeue $JOB with checkpoints: $(ls "$RUN"/rl_games/*/nn/ | tr '\n' ' ')"
scontrol requeue "$JOB"
wait_for 60 "job $JOB pending" bash -c "squeue -h -j $JOB -o %T | grep -qx PENDING"
say "after requeue: $(squeue -h -j "$JOB" -o '%T %r StartTime=%S')"
scontrol update JobId="$JOB" StartTime=now && say "StartTime=now (not waiting for the requeue's BeginTime)"
wait_for 600 "job $JOB" job_done "$JOB"
check "requeued job COMPLETED ($(state_of "$JOB"))" test "$(state_of "$JOB")" = COMPLETED
check "its summary says it resumed" bash -c "$PY -c \"import json,sys; s=json.load(open('$RUN/summary.json')); print('resumed:', s['resumed']); sys.exit(not (s['status']=='ok' and s['resumed'] and s['resumed']['epoch'] >= 2))\""
check "the log kept both attempts (--open-mode=append)" bash -c \
  "grep -q 'CANCELLED\|srun: ' $WORK/runs/gmiexp-sbatch-$JOB.log && grep -q '^gmiexp ok' $WORK/runs/gmiexp-sbatch-$JOB.log"
sacct -n -P -j "$JOB" -o JobID,JobName,State,ExitCode,Start,End
tail -n 3 "$WORK/runs/gmiexp-sbatch-$JOB.log"

# ---- 6. a population as one sbatch job: scontrol requeue, then it goes on ----
say "6. a pbt population (2 members) under sbatch, requeued after its third interval"
cat >"$WORK/runs/pbt.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=gmiexp-pbt
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=$WORK/runs/%x-%j.log

srun $PY -m gmiexp ${SIZES[*]} pbt=default pbt.population=2 pbt.interval_steps=128 max_iterations=40 \\
    launch.nnodes="\$SLURM_NNODES" hydra.run.dir=$WORK/runs/pbt/"\$SLURM_JOB_ID" &
wait \$!
EOF
JOB=$(sbatch --parsable "$WORK/runs/pbt.sh")
RUN=$WORK/runs/pbt/$JOB
third() { [ "$(grep -c '"event": "record".*"interval": 3,' "$RUN/pbt/state.jsonl" 2>/dev/null)" = 2 ]; }
wait_for 300 "both members' third interval" third
scontrol requeue "$JOB"
wait_for 60 "job $JOB pending" bash -c "squeue -h -j $JOB -o %T | grep -qx PENDING"
scontrol update JobId="$JOB" StartTime=now
wait_for 600 "job $JOB" job_done "$JOB"
check "requeued population job COMPLETED ($(state_of "$JOB"))" test "$(state_of "$JOB")" = COMPLETED
check "its log: stopped, resumed from each member's checkpoint, finished" "$PY" -c "
import json, sys
ev = [json.loads(line) for line in open('$RUN/pbt/state.jsonl')]
kinds = [e['event'] for e in ev]
again = [e for e in ev[kinds.index('resumed'):] if e['event'] == 'start'] if 'resumed' in kinds else []
ok = (kinds.count('population') == 1 and 'stopped' in kinds and 'finished' in kinds
      and kinds.index('stopped') < kinds.index('resumed') < kinds.index('finished')
      and sorted(e['member'] for e in again) == [0, 1] and all(e['cause'] == 'resume' for e in again))
print('log:', kinds.count('record'), 'records;', [(e['member'], e['life'], e['cause']) for e in again])
sys.exit(not ok)"
check "its summary: the population ok" grep -q '"status": "ok"' "$RUN/summary.json"
tail -n 2 "$WORK/runs/gmiexp-pbt-$JOB.log"

if [ $FAILS = 0 ]; then say "all checks passed"; else say "$FAILS check(s) FAILED"; fi
[ $FAILS = 0 ]
