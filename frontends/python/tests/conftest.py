"""Helpers: run a real Python program in a subprocess with tracing configured, then read
the real trace files it wrote (gzip members decoded by `gzip`, every line by `json`)."""

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The programs the tests start inherit SIGINT and SIGQUIT with their default action, as from
# an interactive shell: a shell starts background jobs (`make test &`) with both ignored, and
# an ignored SIGINT survives exec (CPython then installs no KeyboardInterrupt handler). A
# Python handler here resets to the default in every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, out: Path):
        self.proc = proc
        self.out = out
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def files(self):
        return sorted(p for p in self.out.rglob("*.pfw*"))

    def traces(self):
        """{path: [records]} for every trace file; every line must be JSON."""
        result = {}
        for f in self.files():
            assert f.stat().st_size > 0, f"0-byte trace file {f}"
            opener = gzip.open if f.name.endswith(".gz") else open
            with opener(f, "rt", encoding="utf-8") as fh:
                text = fh.read()
            assert text.endswith("\n"), f"unterminated last line in {f}"
            result[f] = [json.loads(line) for line in text.splitlines()]
        return result

    def records(self):
        return [r for recs in self.traces().values() for r in recs]

    def events(self, name=None):
        return [
            r
            for r in self.records()
            if r.get("ph") == 1 and r.get("cat") != "dftracer" and (name is None or r["name"] == name)
        ]


@pytest.fixture
def run(tmp_path):
    """run(code, env={...}, enable=True, timeout=60, args=[]) -> Run"""

    def _run(code, env=None, enable=True, timeout=90, args=(), check=True, module_files=None):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        for name, text in (module_files or {}).items():
            (work / name).write_text(textwrap.dedent(text))
        script = work / "main.py"
        script.write_text(textwrap.dedent(code))
        # Nor a launcher's rank (a run under srun or mpirun): it would be end.args.app.rank.
        rank_vars = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "FLUX_TASK_RANK", "SLURM_PROCID")
        e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k not in rank_vars}
        if enable:
            e["DFTRACER_ENABLE"] = "1"
            e["DFTRACER_LOG_FILE"] = str(out / "trace")
        e.update(env or {})
        e["OUT"] = str(out)
        proc = subprocess.run(
            [sys.executable, str(script), *args],
            cwd=work,
            env=e,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        r = Run(proc, out)
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return r

    return _run


def self_contained(recs):
    """Every file stands alone: HH, start, end; every hash an event uses is defined in it."""
    names = [r["name"] for r in recs]
    assert names.count("HH") == 1 and names.count("start") == 1 and names.count("end") == 1, names[:10]
    defined = {r["args"]["value"] for r in recs if r.get("ph") == 4 and r["name"] in ("FH", "SH")}
    start = next(r for r in recs if r["name"] == "start")
    for k in ("cmd_hash", "exec_hash", "cwd"):
        assert start["args"][k] in defined
    end = next(r for r in recs if r["name"] == "end")
    ids = [r["id"] for r in recs if r.get("ph") == 1]
    assert ids == list(range(1, len(ids) + 1)), "ids sequential from 1"
    assert end["args"]["num_events"] == len(ids) - 1


def our_wheel(tmp: Path) -> Path:
    """Our wheel: $DFT_WHEEL (what scripts/test.sh built), else built here."""
    given = os.environ.get("DFT_WHEEL")
    if given:
        return Path(given)
    out = tmp / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(Path(__file__).resolve().parent.parent)],
        check=True,
    )
    return next(out.glob("*.whl"))


@pytest.fixture(scope="session")
def pydftracer_venv(tmp_path_factory):
    """A venv (made once per session) with our wheel, then pydftracer 2.0.6 from PyPI (its
    files go into dftracer/python; ours stay in dftracer/_layer) and its dependency
    typing_extensions: its python. `DFTRACER_PYTHON_LAYER=pydftracer` runs pydftracer's layer
    over our native module; without it, ours."""
    import venv

    tmp = tmp_path_factory.mktemp("pydftracer-venv")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + [str(our_wheel(tmp))], check=True)
    subprocess.run(pip + ["--no-deps", "pydftracer==2.0.6", "typing_extensions"], check=True)
    return py
