"""Trace size, ours vs the reference (dftracer 2.2.0), in one run:

1. the training-like loop of benches/python/train_loop.py (2,000 files of 64 KiB read inside
   decorated functions, I/O bound in process with initialize_log(data_dir=...), metadata on
   for both): file bytes, lines, events (records with an id), bytes per sample (one file
   read + compute) and per event, JSON bytes per event; and what gzip -6 / -9 of the same
   JSON would take (where our bytes go: the lines or the compressor); and ours restricted to
   the event kinds the reference recorded ("the same information": `same_information`);
2. the node service at 1000 ms for --seconds s (stopped with SIGTERM, and ours also killed
   with SIGKILL): bytes per sample (`cpu` records, one per tick) and per record.

Every file is checked with `gzip -t` and dftracer_validate (dftracer-utils 0.0.14) from the
reference venv. Not a timed test: run it by hand.

    python3 benches/size/run.py --ours VENV --ref VENV --service target/release/dftracer_service \
        [--seconds 60] [--record benches/record/trace_size.json]
"""

import argparse
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def loop_script():
    text = (ROOT / "benches/python/train_loop.py").read_text()
    start = text.index('LOOP = r"""') + len('LOOP = r"""')
    return text[start:text.index('"""', start)]


def env(out, extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    e.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=os.path.join(out, "t"))
    e.update(extra or {})
    return e


def check(path, validate):
    """gzip -t and dftracer_validate: 'ok' or what failed."""
    problems = []
    if subprocess.run(["gzip", "-t", str(path)], capture_output=True).returncode != 0:
        problems.append("gzip -t")
    r = subprocess.run([validate, "--files", str(path)], capture_output=True, text=True)
    if r.returncode != 0 or "1 passed, 0 failed" not in r.stdout + r.stderr:
        problems.append("dftracer_validate")
    return "ok" if not problems else "FAILED: " + ", ".join(problems)


def members(raw):
    import zlib
    n = pos = 0
    while pos < len(raw):
        d = zlib.decompressobj(31)
        d.decompress(raw[pos:])
        pos = len(raw) - len(d.unused_data)
        n += 1
    return n


def describe(path, validate, samples=None, sample_name=None):
    raw = Path(path).read_bytes()
    text = gzip.decompress(raw)
    lines = text.splitlines()
    events = sum(1 for l in lines if l.startswith(b'{"id":'))
    if sample_name:
        samples = sum(1 for l in lines if f'"name":"{sample_name}",'.encode() in l)
    return {
        "bytes": len(raw),
        "members": members(raw),
        "json_bytes": len(text),
        "lines": len(lines),
        "events": events,
        "samples": samples,
        "bytes_per_sample": round(len(raw) / samples, 1),
        "bytes_per_event": round(len(raw) / max(events, 1), 2),
        "bytes_per_line": round(len(raw) / len(lines), 2),
        "json_bytes_per_line": round(len(text) / len(lines), 1),
        "gzip6_bytes": len(gzip.compress(text, 6)),
        "gzip9_bytes": len(gzip.compress(text, 9)),
        "check": check(path, validate),
    }


def train_loop(a, validate, work):
    data = work / "data"
    data.mkdir()
    for i in range(2000):
        (data / f"f{i:05d}.bin").write_bytes(os.urandom(64 * 1024))
    script = work / "loop.py"
    script.write_text(loop_script())
    res = {}
    for impl, venv in (("ours", a.ours), ("ref", a.ref)):
        out = work / f"train-{impl}"
        out.mkdir()
        subprocess.run([f"{venv}/bin/python", str(script), str(data), str(out), "io"],
                       env=env(str(out)), capture_output=True, text=True, check=True)
        f = [p for p in out.glob("*.pfw.gz")]
        assert len(f) == 1, f
        res[impl] = describe(f[0], validate, samples=2000)
        res[impl]["file"] = f[0]
    res["ours_same_info"] = same_information(res["ours"]["file"], res["ref"]["file"], work)
    for r in res.values():
        r.pop("file", None)
    return res


def kinds(path):
    return {json.loads(l)["name"] for l in gzip.open(path) if l.startswith(b'{"id":')}


def same_information(ours, ref, work):
    """Our trace restricted to the event kinds the reference recorded (it misses the fstat64,
    isatty and readdir64 calls that Python's open() and os.listdir make), ids renumbered, and
    compressed as our writer writes (core/benches/bin/same_info_size.rs: 1 MiB members, line
    hints; it reproduces the whole file's size within bytes)."""
    drop = sorted(kinds(ours) - kinds(ref))
    text = work / "ours.json"
    text.write_bytes(gzip.decompress(Path(ours).read_bytes()))
    out = subprocess.run(["cargo", "run", "--release", "-q", "-p", "dftracer-core", "--example",
                          "same_info_size", "--", str(text)] + drop,
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    got = dict(zip(out[::2], map(int, out[1::2])))
    return {"bytes": got["bytes"], "members": "-", "lines": got["lines"], "events": got["events"],
            "samples": 2000, "bytes_per_sample": round(got["bytes"] / 2000, 1),
            "bytes_per_event": round(got["bytes"] / max(got["events"], 1), 2),
            "json_bytes_per_line": "-", "gzip6_bytes": "-", "gzip9_bytes": "-",
            "check": "ok", "dropped_kinds": drop}


def service(a, validate, work):
    host = socket.gethostname().split(".")[0]
    ref_bin = subprocess.run([f"{a.ref}/bin/python", "-c",
                              "import dftracer, os; print(os.path.join(os.path.dirname(dftracer.__file__), 'bin', 'dftracer_service'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    runs = {"ours": a.service, "ours_sigkill": a.service, "ref": ref_bin}
    pids = {}
    for name, binary in runs.items():
        d = work / f"svc-{name}"
        (d / "out").mkdir(parents=True)
        (d / "state").mkdir()
        e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
        e.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=str(d / "out/svc"), DFTRACER_TRACE_INTERVAL_MS="1000")
        subprocess.run([binary, "start", str(d / "state")], env=e, capture_output=True, check=True)
        pid_file = d / "state" / f"dftracer_server_{host}.pid"
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.02)
        pids[name] = int(pid_file.read_text().split()[0])
    time.sleep(a.seconds)
    res = {}
    for name, binary in runs.items():
        d = work / f"svc-{name}"
        if name.endswith("sigkill"):
            os.kill(pids[name], signal.SIGKILL)
        else:
            subprocess.run([binary, "stop", str(d / "state")], capture_output=True)
        for _ in range(500):
            try:
                os.kill(pids[name], 0)
                st = Path(f"/proc/{pids[name]}/status").read_text()
                if "\nState:\tZ" in st:
                    break
                time.sleep(0.02)
            except (ProcessLookupError, FileNotFoundError):
                break
    time.sleep(0.2)
    for name in runs:
        f = [p for p in (work / f"svc-{name}/out").glob("*.pfw.gz")]
        assert len(f) == 1, f
        r = describe(f[0], validate, sample_name="cpu")
        r["bytes_per_record"] = round(r["bytes"] / sum(1 for _ in gzip.open(f[0])), 1)
        res[name] = r
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True, help="venv with our wheel")
    ap.add_argument("--ref", required=True, help="venv with dftracer==2.2.0 pydftracer==2.0.6 dftracer-utils==0.0.14")
    ap.add_argument("--service", required=True, help="our dftracer_service binary (release)")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--record")
    a = ap.parse_args()
    validate = f"{a.ref}/bin/dftracer_validate"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        result = {"train_loop": train_loop(a, validate, work), "service_1000ms": service(a, validate, work)}
    cols = ["bytes", "members", "lines", "events", "samples", "bytes_per_sample", "bytes_per_event",
            "json_bytes_per_line", "gzip6_bytes", "gzip9_bytes", "check"]
    for part, rows in result.items():
        print(part)
        print("  " + " ".join(f"{c:>17}" for c in ["impl"] + cols))
        for impl, r in rows.items():
            print("  " + " ".join(f"{str(v):>17}" for v in [impl] + [r[c] for c in cols]))
    result["command"] = " ".join(sys.argv)
    result["machine"] = f"{os.cpu_count()} cpus, {os.uname().release}"
    if a.record:
        Path(a.record).write_text(json.dumps(result, indent=2) + "\n")
    bad = [f"{p}/{i}" for p, rows in result.items() if isinstance(rows, dict)
           for i, r in rows.items() if isinstance(r, dict) and r.get("check") != "ok"]
    if bad:
        print("not accepted by the readers: " + ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
