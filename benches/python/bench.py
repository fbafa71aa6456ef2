"""Per-call overhead of the Python API, one configuration per process.

    python bench.py <label> <out_dir> [calls]

Prints one JSON object: ns per call for each workload. Run by run.py under tracing off, ours
and the reference (pydftracer 2.0.6 + dftracer 2.2.0), in alternating rounds. Everything is
written as users write it: `with dft_fn(...)` and log_event's dicts inline, next to their
baselines (`with threading.Lock():`, building the same dicts without the call).
"""

import json
import os
import sys
import threading
import time

label, out = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000

from dftracer.python import dftracer, dft_fn  # noqa: E402

# "failed": the start from DFTRACER_LOG_FILE fails; an explicit path would try again.
logfile = None if label == "failed" else os.path.join(out, "bench.pfw")
log = dftracer.initialize_log(logfile=logfile, data_dir=None, process_id=-1)
df = dft_fn("bench")


def plain(a=1, b=2):
    return a


@df.log
def deco0():
    return 1


@df.log
def deco2(a, b=2):
    return a


def timeit(fn, n=N):
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def run_plain(n):
    for _ in range(n):
        plain()


def run_plain2(n):
    for i in range(n):
        plain(i, b=2)


def run_deco0(n):
    for _ in range(n):
        deco0()


def run_deco2(n):
    for i in range(n):
        deco2(i, b=2)


def run_ctx(n):
    for _ in range(n):
        with dft_fn("bench", name="region"):
            pass


inst = dftracer.get_instance()
t = inst.get_time()
# A real timestamp with tracing off too (get_time() is 0 then), so `t + i` costs the same.
t = t if isinstance(t, int) and 0 < t < 2**62 else 1_700_000_000_000_000


def run_log_event(n):
    for i in range(n):
        inst.log_event("ev", "bench", t + i, 10, int_args={"step": (0, i)}, float_args={"f": (0, 1.5)},
                       string_args={"s": (0, "v")})


def run_log_event_inline(n):
    # As users write it: the dicts built inline at each call (the case).
    for i in range(n):
        inst.log_event("ev", "bench", t + i, 10, int_args={"step": (0, i)}, string_args={"s": (0, "v")})


def run_dicts_only(n):
    # Baseline of log_event_inline: building the same arguments and dicts, no call.
    for i in range(n):
        a = ("ev", "bench", t + i, 10, {"step": (0, i)}, {"s": (0, "v")})  # noqa: F841


def run_lock_ctx(n):
    # Baseline of context_manager: building and entering a native context manager.
    for _ in range(n):
        with threading.Lock():
            pass


def run_loop(n):
    for _ in range(n):
        pass


res = {
    "label": label,
    "loop": timeit(run_loop),
    "plain_f()": timeit(run_plain),
    "plain_f(a,b=2)": timeit(run_plain2),
    "deco_f()": timeit(run_deco0),
    "deco_f(a,b=2)": timeit(run_deco2),
    "context_manager": timeit(run_ctx, N // 2),
    "log_event_3args": timeit(run_log_event, N // 2),
    "lock_ctx": timeit(run_lock_ctx, N // 2),
    "dicts_only": timeit(run_dicts_only, N // 2),
    "log_event_inline": timeit(run_log_event_inline, N // 2),
}
log.finalize()
print(json.dumps(res))
