#!/usr/bin/env bash
# One dftracer_service per node around a multi-node job, with srun, mpirun, flux, or locally.
#
#   LAUNCHER=srun   examples/multinode_service.sh python train.py       # in an sbatch/salloc job
#   LAUNCHER=mpirun NODES=4 examples/multinode_service.sh -np 16 python train.py
#   LAUNCHER=flux   NODES=4 examples/multinode_service.sh python train.py   # untested: see README
#   LAUNCHER=local  examples/multinode_service.sh sleep 5                   # one node, no scheduler
#
# Everything goes under RUN_DIR (default ./dftracer-<date>), which must be on a file system
# every node sees: traces/node_<hostname>.pfw.gz (one per node, the service),
# traces/app-<hash>-app.pfw.gz (one per traced process, if DFTRACER_ENABLE=1 is exported; the
# rank is in its end record), state/dftracer_server_<shorthost>.{pid,out,err}.
# The arguments are the job: with srun they follow `srun --nodes=$NODES $APP_SRUN_ARGS`,
# with mpirun they follow `$MPIRUN $MPIRUN_ARGS` (so they start with mpirun's own options);
# MPIRUN_ARGS (a hostfile, --allow-run-as-root, ...) is given to the service's launches too.
# tests/multinode/test_multinode.py runs the srun, mpirun and local branches.
#
# Why two styles:
# * srun and flux kill whatever a job step leaves behind when the step ends, so a daemon
#   detached by `start` inside a step would not outlive it. There we run the service in the
#   foreground (`dftracer_service run`) as its own background step, one task per node, and end
#   it with a `stop` step, which returns once every node's daemon has exited with its trace
#   complete. `scancel` of the job sends SIGTERM to every step: the traces are completed too.
# * mpirun (Open MPI, MPICH/Hydra) leaves a detached daemon alone, so `start`/`stop` in a
#   one-task-per-node launch is enough, as with the reference service.
set -euo pipefail

[ $# -gt 0 ] || { sed -n '2,16p' "$0"; exit 2; }

SVC=${SVC:-$(command -v dftracer_service || echo "$(dirname "$0")/../target/release/dftracer_service")}
LAUNCHER=${LAUNCHER:-srun}
NODES=${NODES:-${SLURM_JOB_NUM_NODES:-1}}
RUN_DIR=${RUN_DIR:-$PWD/dftracer-$(date +%Y%m%d-%H%M%S)}
OUT=$RUN_DIR/traces
STATE=$RUN_DIR/state
mkdir -p "$OUT" "$STATE"

# The service's settings (every node's service inherits them); the application's own trace
# prefix, unless the caller chose one.
NODE_PREFIX=$OUT/node
export DFTRACER_TRACE_INTERVAL_MS=${DFTRACER_TRACE_INTERVAL_MS:-1000}
export DFTRACER_LOG_FILE=${DFTRACER_LOG_FILE:-$OUT/app}
SVC_ENV=(env "DFTRACER_LOG_FILE=$NODE_PREFIX")

wait_for_services() { # SINCE_FILE: every node's service wrote its PID file after SINCE_FILE
    local n=0
    for _ in $(seq 1 600); do
        n=$(find "$STATE" -name 'dftracer_server_*.pid' -newer "$1" | wc -l)
        [ "$n" -ge "$NODES" ] && return 0
        sleep 0.1
    done
    echo "only $n of $NODES services came up; see $STATE/*.err" >&2
    return 1
}

status=0
case $LAUNCHER in
srun)
    # A PID file older than this launch (a node that died in an earlier job) does not count.
    since=$STATE/.launch-${SLURM_JOB_ID:-$$}
    touch "$since"
    sleep 0.01 # a PID file written in the same clock tick as the marker would not be -newer
    srun --overlap --nodes="$NODES" --ntasks-per-node=1 --ntasks="$NODES" \
        "${SVC_ENV[@]}" "$SVC" run "$STATE" &
    SERVICE_STEP=$!
    wait_for_services "$since" || { kill "$SERVICE_STEP"; wait "$SERVICE_STEP"; exit 1; }
    # shellcheck disable=SC2086
    srun --nodes="$NODES" ${APP_SRUN_ARGS:-} "$@" || status=$?
    srun --overlap --nodes="$NODES" --ntasks-per-node=1 --ntasks="$NODES" "$SVC" stop "$STATE"
    wait "$SERVICE_STEP" || true
    rm -f "$since"
    ;;
flux)
    since=$STATE/.launch-$$
    touch "$since"
    sleep 0.01
    JOBID=$(flux submit --nodes="$NODES" --tasks-per-node=1 "${SVC_ENV[@]}" "$SVC" run "$STATE")
    wait_for_services "$since"
    flux run --nodes="$NODES" "$@" || status=$?
    flux run --nodes="$NODES" --tasks-per-node=1 "$SVC" stop "$STATE"
    flux job wait "$JOBID" || true
    rm -f "$since"
    ;;
mpirun)
    MPIRUN=${MPIRUN:-mpirun}
    # One process per node, and the DFTRACER_* variables passed on: Open MPI forwards only
    # what -x names to other nodes; Hydra forwards the whole environment.
    case "$("$MPIRUN" --version 2>&1)" in
    *"Open MPI"* | *OpenRTE*)
        PER_NODE=(--map-by ppr:1:node -np "$NODES")
        FWD=()
        for v in $(compgen -e | grep '^DFTRACER_' || true); do FWD+=(-x "$v"); done
        ;;
    *HYDRA* | *MPICH* | *"Intel(R) MPI"*)
        PER_NODE=(-ppn 1 -n "$NODES")
        FWD=()
        ;;
    *)
        echo "$MPIRUN: neither Open MPI nor MPICH/Hydra; set MPIRUN" >&2
        exit 2
        ;;
    esac
    read -r -a ARGS <<<"${MPIRUN_ARGS:-}"
    "$MPIRUN" "${ARGS[@]}" "${PER_NODE[@]}" "${FWD[@]}" "${SVC_ENV[@]}" "$SVC" start "$STATE"
    "$MPIRUN" "${ARGS[@]}" "${FWD[@]}" "$@" || status=$?
    "$MPIRUN" "${ARGS[@]}" "${PER_NODE[@]}" "${FWD[@]}" "$SVC" stop "$STATE"
    ;;
local)
    NODES=1
    "${SVC_ENV[@]}" "$SVC" start "$STATE"
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
