#!/usr/bin/env bash
# The main job: builds everything on a fresh machine, starts the node service, runs a traced
# training-like Python program (annotated functions, spawned DataLoader-style workers, file
# reads), stops the service, and prints where the traces are with a summary of each.
source "$(dirname "$0")/env.sh"
source "$ROOT/scripts/steps.sh"
cd "$ROOT"
OUT="${DFT_DEMO_OUT:-$ROOT/dft-demo}"
rm -rf "$OUT/traces" "$OUT/service"
mkdir -p "$OUT/service"

echo "== building (release): the service, then the Python wheel (about 2 minutes the first time)"
cargo build --release -p dftracer-service
demo_wheel() {
  venv "$ROOT/.venv-demo" pip
  "$ROOT/.venv-demo/bin/python" -m pip install -v --disable-pip-version-check --force-reinstall \
    --no-deps "$ROOT/frontends/python"
}
quietly "$ROOT/target/demo-logs/wheel.log" "the Python wheel (maturin), into .venv-demo" demo_wheel
SVC="$ROOT/target/release/dftracer_service"

echo "== starting the node service"
DFTRACER_ENABLE=1 DFTRACER_LOG_FILE="$OUT/service/node" DFTRACER_TRACE_INTERVAL_MS=250 \
  "$SVC" start "$OUT/service"

echo "== traced training run"
DFTRACER_ENABLE=1 "$ROOT/.venv-demo/bin/python" examples/train.py --out "$OUT" --samples 256 --epochs 3
sleep 1   # a few more service samples around the run

echo "== stopping the service"
"$SVC" stop "$OUT/service"
python3 - "$OUT/service" <<'PY'
import gzip, json, sys, collections, pathlib
files = sorted(pathlib.Path(sys.argv[1]).glob("*.pfw.gz"))
for f in files:
    recs = [json.loads(l) for l in gzip.open(f, "rt")]
    c = collections.Counter(r["name"] for r in recs if r.get("ph") == 2)
    cpu = [r["args"] for r in recs if r.get("name") == "cpu"]
    print(f"service trace: {f}  ({f.stat().st_size} bytes)")
    names = sorted(c)
    shown = ", ".join(f"{k}={c[k]}" for k in names[:8]) + (", ..." if len(names) > 8 else "")
    print(f"summary: {sum(c.values())} counter records of {len(names)} kinds: {shown}")
    if cpu:
        busiest = max(cpu, key=lambda a: a.get("idle_pct", 100) * -1)
        print("busiest cpu sample: " + ", ".join(f"{k}={busiest[k]:.1f}" for k in ("user_pct", "system_pct", "iowait_pct", "idle_pct") if k in busiest))
PY
validate=dftracer_validate
[ -x "$ROOT/.venv-utils/bin/dftracer_validate" ] && validate=.venv-utils/bin/dftracer_validate
cat <<EOF

== next
  zcat $OUT/traces/*.pfw.gz | head -n 20      # one JSON object per line (FORMAT.md)
  $validate --files $OUT/traces/*.pfw.gz   # dftracer-utils: pip install dftracer-utils (make test puts it in .venv-utils)
  DFTRACER_ENABLE=1 .venv-demo/bin/python examples/train.py --out $OUT   # the run again
  make clean                                   # removes $OUT, target/ and the venvs
EOF
