#!/usr/bin/env bash
# Ecosystem check: traces written by our examples are accepted by dftracer-utils 0.0.14 from
# PyPI (installed here, never vendored): dftracer_validate passes every file and
# dftracer_event_count equals the number of complete events (ph 1) we count ourselves.
source "$(dirname "$0")/../scripts/env.sh"
cd "$ROOT"
UTILS="$ROOT/.venv-utils"
venv "$UTILS" dftracer-utils==0.0.14
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo run -q --release -p dftracer-examples --bin threads -- "$work/core" 4 20000 >/dev/null
dirs=("$work/core/")
if [ -x "$ROOT/.venv-test/bin/python" ] && "$ROOT/.venv-test/bin/python" -c "import dftracer.python" 2>/dev/null; then
  DFTRACER_ENABLE=1 "$ROOT/.venv-test/bin/python" examples/train.py --out "$work/train" --quiet >/dev/null
  dirs+=("$work/train/traces/")
fi
pass=0; fail=0
for dir in "${dirs[@]}"; do
  files=("$dir"*.pfw.gz)
  [ -e "${files[0]}" ] || continue
  out=$("$UTILS/bin/dftracer_validate" --files "${files[@]}" 2>/dev/null | grep -E '^Validated' || true)
  echo "validate $(basename "$dir"): $out"
  case "$out" in *" 0 failed"*) pass=$((pass+1));; *) echo "FAIL: dftracer_validate did not pass every file"; fail=$((fail+1));; esac
  theirs=$("$UTILS/bin/dftracer_event_count" -d "$dir" 2>/dev/null | tail -n 1 | tr -dc '0-9')
  ours=$(python3 - "${files[@]}" <<'PY'
import gzip, json, sys
n = 0
for f in sys.argv[1:]:
    with gzip.open(f, "rt") as fh:
        for line in fh:
            if json.loads(line).get("ph") == 1:
                n += 1
print(n)
PY
)
  echo "event_count $(basename "$dir"): dftracer_event_count=$theirs ours=$ours"
  if [ -n "$ours" ] && [ "$theirs" = "$ours" ]; then pass=$((pass+1)); else echo "FAIL: event counts differ"; fail=$((fail+1)); fi
done
echo "ecosystem: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
