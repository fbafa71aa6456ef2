#!/usr/bin/env bash
# One dftracer_service per node around a multi-node job, with mpirun, flux or srun.
#
#   LAUNCHER=srun   NODES=4 examples/multinode_service.sh ./my_app --steps 100
#   LAUNCHER=flux   NODES=4 examples/multinode_service.sh python train.py
#   LAUNCHER=mpirun NODES=4 examples/multinode_service.sh ./my_app
#   LAUNCHER=local          examples/multinode_service.sh sleep 5     # one node, no scheduler
#
# Each node writes $OUT/node_<hostname>.pfw.gz; the state files
# $STATE/dftracer_server_<shorthost>.{pid,out,err} of all nodes share one directory, so both
# must be on a file system every node sees.
#
# Why two styles:
# * srun and flux kill whatever a job step leaves behind when the step ends, so a daemon
#   detached by `start` inside a step would not outlive it. There we run the service in the
#   foreground (`dftracer_service run`) as its own background step, one task per node, and end
#   it with a `stop` step, which returns once every node's trace is complete.
# * mpirun (Open MPI, MPICH/Hydra) leaves a detached daemon alone, so `start`/`stop` in a
#   one-task-per-node launch is enough, as with the reference service.
set -euo pipefail

[ $# -gt 0 ] || { sed -n '2,8p' "$0"; exit 2; }

SVC=${SVC:-$(command -v dftracer_service || echo "$(dirname "$0")/../target/release/dftracer_service")}
LAUNCHER=${LAUNCHER:-srun}
NODES=${NODES:-${SLURM_JOB_NUM_NODES:-1}}
RUN_DIR=${RUN_DIR:-$PWD/dftracer-$(date +%Y%m%d-%H%M%S)}
OUT=$RUN_DIR/traces
STATE=$RUN_DIR/state
mkdir -p "$OUT" "$STATE"

# What every service (and the application, if it is traced too) inherits.
export DFTRACER_LOG_FILE=$OUT/node
export DFTRACER_TRACE_INTERVAL_MS=${DFTRACER_TRACE_INTERVAL_MS:-1000}

wait_for_services() {
    # `run` writes its PID file once it samples: wait until every node has one.
    local n
    for _ in $(seq 1 300); do
        n=$(find "$STATE" -name 'dftracer_server_*.pid' | wc -l)
        [ "$n" -ge "$NODES" ] && return 0
        sleep 0.1
    done
    echo "only $n of $NODES services came up; see $STATE/*.err" >&2
    return 1
}

case $LAUNCHER in
srun)
    srun --overlap --nodes="$NODES" --ntasks-per-node=1 --ntasks="$NODES" \
        "$SVC" run "$STATE" &
    SERVICE_STEP=$!
    wait_for_services
    status=0
    srun --nodes="$NODES" "$@" || status=$?
    srun --overlap --nodes="$NODES" --ntasks-per-node=1 --ntasks="$NODES" "$SVC" stop "$STATE"
    wait "$SERVICE_STEP" || true
    ;;
flux)
    JOBID=$(flux submit --nodes="$NODES" --tasks-per-node=1 "$SVC" run "$STATE")
    wait_for_services
    status=0
    flux run --nodes="$NODES" "$@" || status=$?
    flux run --nodes="$NODES" --tasks-per-node=1 "$SVC" stop "$STATE"
    flux job wait "$JOBID" || true
    ;;
mpirun)
    # Open MPI: one process per node. For MPICH/Hydra use `-ppn 1 -n $NODES` instead.
    MAP=${MPIRUN_MAP:-"--map-by ppr:1:node -np $NODES"}
    # shellcheck disable=SC2086
    mpirun $MAP "$SVC" start "$STATE"
    status=0
    mpirun "$@" || status=$?
    # shellcheck disable=SC2086
    mpirun $MAP "$SVC" stop "$STATE"
    ;;
local)
    NODES=1
    "$SVC" start "$STATE"
    status=0
    "$@" || status=$?
    "$SVC" stop "$STATE"
    ;;
*)
    echo "LAUNCHER must be srun, flux, mpirun or local (got $LAUNCHER)" >&2
    exit 2
    ;;
esac

echo "node traces:"
ls -l "$OUT"/node_*.pfw* 2>/dev/null || echo "  none (see $STATE/*.err)"
exit "$status"
