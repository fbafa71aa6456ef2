# Sourced by scripts/test.sh and scripts/demo.sh: runs commands as named steps whose output
# goes to a log file, never silent for more than ~10 s, with their counts and durations.
#
#   run_step NAME PARSER TITLE CMD...
#
# NAME    the log is $STEP_LOGS/NAME.log
# PARSER  how the log gives the step's counts: `cargo` (sum of `test result:` lines, the last
#         one of each test binary), `pytest` (its final line), `summary:WORD` (a line
#         `WORD: N passed, N failed[, N skipped]`), or `-` (no counts: the step is one check)
# TITLE   shown when the step starts
# CMD     a command or shell function; it runs in a subshell with errexit.
#
# While the step runs, lines of cargo's progress (`Compiling`, `Finished`) are shown as they
# come; after 10 s without any, one heartbeat line says how long it has run and the log's
# last line. At the end: `ok`/`FAIL`, the counts and the duration. A failed step prints the
# failures found in its log and its last lines. Totals are kept in STEPS_{PASSED,FAILED,
# SKIPPED} and the names of failed steps in STEPS_FAILED_NAMES.

STEP_LOGS="${STEP_LOGS:-$ROOT/target/test-logs}"
STEPS_PASSED=0 STEPS_FAILED=0 STEPS_SKIPPED=0 STEPS_RUN=0
STEPS_FAILED_NAMES=()
STEP_LIVE='^ *(Compiling|Checking|Finished|Installing|Downloaded|Updating) '
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export PYTHONUNBUFFERED=1 # Python runners' lines reach the log (and the heartbeat) as printed

fmt_secs() { # 75 -> 1m15s
  local s=$1
  if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

# Prints "PASSED FAILED SKIPPED" found in LOG by PARSER, or nothing when it found no count.
step_counts() { # PARSER LOG
  case "$1" in
    cargo)
      # Each test binary prints one `test result:` line at its end; lines a test's child
      # processes might print come before it, so only the last one per binary counts.
      awk '
        function flush() { if (have) { p += cp; f += cf; s += cs; any = 1 }; have = 0 }
        /^ *(Running|Doc-tests) / { flush() }
        /^test result: / {
          have = 1; cp = cf = cs = 0
          if (match($0, /[0-9]+ passed/)) cp = substr($0, RSTART, RLENGTH) + 0
          if (match($0, /[0-9]+ failed/)) cf = substr($0, RSTART, RLENGTH) + 0
          if (match($0, /[0-9]+ ignored/)) cs = substr($0, RSTART, RLENGTH) + 0
        }
        END { flush(); if (any) print p + 0, f + 0, s + 0 }' "$2" ;;
    pytest)
      # The last line like `12 passed, 1 skipped in 3.2s` (with or without `=` around it).
      { grep -E '(passed|failed|skipped|errors?|no tests ran)([ ,].*)? in [0-9.]+s' "$2" || true; } | tail -n 1 |
        awk '{ line = $0; p = f = s = 0
               if (match(line, /[0-9]+ passed/)) p = substr(line, RSTART, RLENGTH) + 0
               if (match(line, /[0-9]+ failed/)) f = substr(line, RSTART, RLENGTH) + 0
               if (match(line, /[0-9]+ errors?/)) f += substr(line, RSTART, RLENGTH) + 0
               if (match(line, /[0-9]+ skipped/)) s = substr(line, RSTART, RLENGTH) + 0
               print p, f, s }' ;;
    summary:*)
      { grep -E "^${1#summary:}: [0-9]+ passed, [0-9]+ failed" "$2" || true; } | tail -n 1 |
        awk '{ line = $0; p = f = s = 0
               if (match(line, /[0-9]+ passed/)) p = substr(line, RSTART, RLENGTH) + 0
               if (match(line, /[0-9]+ failed/)) f = substr(line, RSTART, RLENGTH) + 0
               if (match(line, /[0-9]+ skipped/)) s = substr(line, RSTART, RLENGTH) + 0
               print p, f, s }' ;;
    *) ;;
  esac
}

# What a failed step shows: the failure blocks of cargo and pytest, then the log's last lines.
step_failure_report() { # LOG
  local log="$1" lines
  lines=$(wc -l <"$log")
  echo "    ---- output of the failed step (full log: ${log#"$ROOT"/}, $lines lines) ----"
  if ((lines <= 150)); then
    sed 's/^/    | /' "$log"
  else
    # cargo: `---- name stdout ----` blocks up to the binary's `test result`; pytest: its
    # `FAILURES`/`ERRORS` sections and short summary; build errors: `error[...]` blocks.
    awk '/^failures:$/ || /^=+ (FAILURES|ERRORS) =+$/ || /^error(\[E[0-9]+\])?: / { on = 1 }
         on { print; n++ } /^test result: / || /^=+ short test summary/ { on = 0 }
         n >= 300 { exit }' "$log" | sed 's/^/    | /'
    echo "    | ... last 60 lines:"
    tail -n 60 "$log" | sed 's/^/    | /'
  fi
  echo "    ---- end of ${log#"$ROOT"/} ----"
}

# Waits for PID, showing cargo's progress lines from LOG as they come and, after 10 s without
# output, a heartbeat with the time since T0 and the log's last line. Returns PID's status.
_watch() { # PID LOG T0
  local pid="$1" log="$2" t0="$3" last=$SECONDS seen=0 n line
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$(wc -l <"$log")
    if ((n > seen)); then
      while IFS= read -r line; do
        if [[ "$line" =~ $STEP_LIVE ]]; then
          echo "    ${line#"${line%%[! ]*}"}"
          last=$SECONDS
        fi
      done < <(sed -n "$((seen + 1)),${n}p" "$log")
      seen=$n
    fi
    if ((SECONDS - last >= 10)); then
      line=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-110 || true)
      echo "    ... $(fmt_secs $((SECONDS - t0))) | ${line:-(no output yet)}"
      last=$SECONDS
    fi
  done
  wait "$pid"
}

run_step() { # NAME PARSER TITLE CMD...
  local name="$1" parser="$2" title="$3"
  shift 3
  mkdir -p "$STEP_LOGS"
  local log="$STEP_LOGS/$name.log" t0=$SECONDS rc=0
  STEPS_RUN=$((STEPS_RUN + 1))
  echo
  echo "=== $name: $title"
  (set -e; "$@") >"$log" 2>&1 </dev/null &
  _watch $! "$log" "$t0" || rc=$?
  local counts p=0 f=0 s=0 what
  counts=$(step_counts "$parser" "$log" || true)
  if [ -n "$counts" ]; then
    read -r p f s <<<"$counts"
    what="$p passed, $f failed"
    ((s)) && what="$what, $s skipped"
    # A runner that stopped early (a build error, a crash) may report no failed test.
    if ((rc != 0 && f == 0)); then f=1 what="$what; exit status $rc"; fi
  elif ((rc == 0)); then
    p=1 what="ok"
  else
    f=1 what="exit status $rc"
  fi
  STEPS_PASSED=$((STEPS_PASSED + p)) STEPS_FAILED=$((STEPS_FAILED + f)) STEPS_SKIPPED=$((STEPS_SKIPPED + s))
  local dur
  dur=$(fmt_secs $((SECONDS - t0)))
  if ((f == 0)); then
    echo "    ok    $name: $what ($dur)"
  else
    STEPS_FAILED_NAMES+=("$name")
    echo "    FAIL  $name: $what ($dur)"
    step_failure_report "$log"
  fi
  return 0
}

# The closing lines: the failed steps and their logs, then one line of totals.
steps_total() { # START_SECONDS
  echo
  local n
  for n in "${STEPS_FAILED_NAMES[@]}"; do
    echo "failed step: $n (log: ${STEP_LOGS#"$ROOT"/}/$n.log)"
  done
  local skipped=""
  ((STEPS_SKIPPED)) && skipped=", $STEPS_SKIPPED skipped"
  local steps="$STEPS_RUN steps"
  ((STEPS_RUN == 1)) && steps="1 step"
  echo "$STEPS_PASSED passed, $STEPS_FAILED failed$skipped ($steps in $(fmt_secs $((SECONDS - $1))); logs in ${STEP_LOGS#"$ROOT"/}/)"
  ((STEPS_FAILED == 0))
}

# Runs CMD with its output in LOG, showing cargo's progress and a heartbeat; on failure
# prints the log's last lines and returns the status. For the quiet parts of the demo.
quietly() { # LOG TITLE CMD...
  local log="$1" title="$2" t0=$SECONDS rc=0
  shift 2
  mkdir -p "$(dirname "$log")"
  echo "   $title (log: ${log#"$ROOT"/})"
  (set -e; "$@") >"$log" 2>&1 </dev/null &
  _watch $! "$log" "$t0" || rc=$?
  if ((rc != 0)); then
    echo "   FAILED (exit status $rc): $title; last lines of $log:"
    tail -n 40 "$log" | sed 's/^/    | /'
  fi
  return "$rc"
}
