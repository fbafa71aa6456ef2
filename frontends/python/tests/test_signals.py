"""Python's own signal handling is what it is untraced, under the preload (whose constructor
runs before the interpreter sets its handlers) and with the Python module in process (which
starts the tracer after): Ctrl-C raises KeyboardInterrupt, asyncio.run cancels on SIGINT,
`signal.getsignal` reports SIG_DFL where it is, and `signal.signal(s, signal.getsignal(s))`
works. Each program also runs untraced as the reference; the trace is read back from the
real files and must hold every event and its `end`."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import Run

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = ROOT / "target" / "release" / "libdftracer_preload.so"

FATAL = "TERM INT HUP QUIT ABRT PIPE ALRM USR1 USR2 VTALRM PROF XCPU XFSZ SEGV BUS FPE ILL TRAP SYS"

# Prints what Python says about every signal whose default action ends the process, and
# defines reads(n): n traced os.pread calls on DATA/f.bin.
HEAD = f"""
import asyncio, os, signal, sys, time
def show(tag):
    for s in "{FATAL}".split():
        h = signal.getsignal(getattr(signal, "SIG" + s))
        print(tag, s, getattr(h, "__name__", h), flush=True)
fd = os.open(os.path.join(os.environ["DATA"], "f.bin"), os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(fd, b"0123456789", 0)
def reads(n):
    for _ in range(n):
        assert os.pread(fd, 10, 0) == b"0123456789"
def ready():
    print("ready", flush=True)
"""


def start(tmp_path, code, traced, extra_env=None):
    work = tmp_path / ("traced" if traced else "plain")
    (work / "out").mkdir(parents=True, exist_ok=True)
    data = work / "data"
    data.mkdir(exist_ok=True)
    script = work / "main.py"
    script.write_text(HEAD + textwrap.dedent(code))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    env["DATA"] = str(data)
    if traced:
        env.update(
            {
                "DFTRACER_ENABLE": "1",
                "DFTRACER_LOG_FILE": str(work / "out" / "trace"),
                "DFTRACER_DATA_DIR": str(data),
                "DFTRACER_FLUSH_INTERVAL_MS": "600000",
            }
        )
        env.update(extra_env or {})
    p = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return p, work


def signalled(p, sig):
    """Waits for `ready`, sends `sig`, returns (rc, stdout before ready + after, stderr)."""
    first = []
    for line in p.stdout:
        first.append(line)
        if line == "ready\n":
            break
    time.sleep(0.2)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    return p.returncode, "".join(first) + out, err


def both(tmp_path, code, sig, extra_env=None, module=False):
    """The untraced reference and the traced run: (reference, traced, Run for the traced)."""
    if not module:
        assert PRELOAD.exists(), f"build it first: cargo build --release -p dftracer-preload ({PRELOAD})"
        extra_env = {"LD_PRELOAD": str(PRELOAD), "DFTRACER_INIT": "PRELOAD", **(extra_env or {})}
    ref = signalled(start(tmp_path, code, False)[0], sig)
    p, work = start(tmp_path, code, True, extra_env)
    got = signalled(p, sig)
    r = Run(subprocess.CompletedProcess([], got[0], got[1], got[2]), work / "out")
    return ref, got, r


def check_trace(r, n, sig=None):
    recs = r.records()
    preads = [e for e in r.events() if e["name"] in ("pread", "pread64")]
    assert len(preads) == n, (len(preads), r.stderr)
    end = [x for x in recs if x["name"] == "end" and x.get("cat") == "dftracer"]
    assert len(end) == 1, r.stderr
    assert end[0]["args"]["lost"] == 0 and end[0]["args"]["dropped"] == 0
    assert end[0]["args"].get("signal") == sig


def test_ctrl_c_raises_keyboard_interrupt_under_the_preload(tmp_path):
    code = """
    show("start")
    reads(50)
    try:
        ready()
        time.sleep(30)
    except KeyboardInterrupt:
        reads(50)
        print("KeyboardInterrupt", flush=True)
    """
    ref, got, r = both(tmp_path, code, signal.SIGINT)
    assert ref[0] == 0 and "KeyboardInterrupt" in ref[1], ref
    assert "start INT default_int_handler" in ref[1]
    assert got[:2] == ref[:2], (got, ref)
    check_trace(r, 100)


def test_getsignal_reports_sig_dfl_and_setting_it_back_works_under_the_preload(tmp_path):
    code = """
    show("start")
    for s in "{FATAL}".split():
        n = getattr(signal, "SIG" + s)
        signal.signal(n, signal.getsignal(n))
    show("again")
    reads(50)
    ready()
    time.sleep(30)
    """.replace("{FATAL}", FATAL)
    ref, got, r = both(tmp_path, code, signal.SIGTERM)
    assert ref[0] == -signal.SIGTERM, ref
    assert "start TERM 0\n" in ref[1], ref  # Handlers.SIG_DFL
    assert got[:2] == ref[:2], (got, ref)
    # SIG_DFL set back by Python keeps the tracer's stand-in: the trace is finished.
    check_trace(r, 50, signal.SIGTERM)


def test_asyncio_run_cancels_on_sigint_under_the_preload(tmp_path):
    code = """
    async def main():
        try:
            ready()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            print("cancelled", flush=True)
            raise
    reads(50)
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    reads(50)
    """
    ref, got, r = both(tmp_path, code, signal.SIGINT)
    if sys.version_info >= (3, 11):
        assert ref[0] == 0 and "cancelled\nKeyboardInterrupt\n" in ref[1], ref
    assert got[:2] == ref[:2], (got, ref)
    check_trace(r, 100)


def test_the_module_in_process_keeps_cpythons_table_and_the_trace(tmp_path):
    """The Python module starts the tracer after the interpreter set its handlers: what
    Python reports is unchanged, Ctrl-C still raises KeyboardInterrupt, and a SIGTERM left at
    its default (set back with signal.signal) still finishes the trace."""
    pytest.importorskip("dftracer")
    code = """
    show("before")
    if "DFTRACER_ENABLE" in os.environ:
        from dftracer.python import dftracer
        log = os.path.join(os.path.dirname(os.environ["DATA"]), "out", "trace")
        dftracer.initialize_log(logfile=log, data_dir=os.environ["DATA"], process_id=-1)
    show("after")
    for s in ("TERM", "HUP", "USR1"):
        n = getattr(signal, "SIG" + s)
        signal.signal(n, signal.getsignal(n))
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    reads(50)
    ready()
    time.sleep(30)
    """
    ref, got, r = both(tmp_path, code, signal.SIGTERM, module=True)
    assert ref[0] == -signal.SIGTERM and "KeyboardInterrupt" in ref[1], ref
    assert got[:2] == ref[:2], (got, ref)
    check_trace(r, 50, signal.SIGTERM)
