"""The dlio step's tests (scripts/test.sh dlio) run in .venv-dlio: dlio-benchmark 2.0.0 from
PyPI (installed --no-deps), the few packages a CPU pytorch/npz workload imports, our wheel,
and PyTorch from .venv-torch-site (a .pth file). Each run is a real `dlio_benchmark` command
on the workload of configs/workload/dftracer_tiny.yaml; the tests read the trace files it
left and compare them with what the run did (the files on disk, DLIO's own log and stats)."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
WORKLOAD = "dftracer_tiny"
CONFIG = yaml.safe_load((HERE / "configs" / "workload" / f"{WORKLOAD}.yaml").read_text())
# What Open MPI's mpirun passes on to the ranks (it passes only what -x names).
PASSED = ("DFTRACER_ENABLE", "DFTRACER_LOG_FILE", "DFTRACER_DATA_DIR", "PYTHONPATH", "MPI4PY_MPIABI")
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "FLUX_TASK_RANK", "SLURM_PROCID")


def read_trace(path):
    """Every line of a trace file, each parsed as JSON (gzip members decoded by gzip)."""
    assert path.stat().st_size > 0, f"0-byte trace file {path}"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        text = fh.read()
    assert text.endswith("\n"), f"unterminated last line in {path}"
    return [json.loads(line) for line in text.splitlines()]


class Trace:
    """One process's trace file: its records, complete events, and the FH map."""

    def __init__(self, path):
        self.path = path
        self.records = read_trace(path)
        self.events = [r for r in self.records if r.get("ph") == 1 and r.get("cat") != "dftracer"]
        self.files = {
            r["args"]["value"]: r["args"]["name"] for r in self.records if r.get("ph") == 4 and r["name"] == "FH"
        }
        ends = [r for r in self.records if r.get("name") == "end" and r.get("cat") == "dftracer"]
        self.end = ends[0] if len(ends) == 1 else None
        pids = {r["pid"] for r in self.records if "pid" in r}
        self.pid = pids.pop() if len(pids) == 1 else None

    def named(self, name, cat=None):
        return [e for e in self.events if e["name"] == name and (cat is None or e["cat"] == cat)]

    def posix_on(self, predicate):
        """POSIX events whose file (fhash through the FH records) satisfies predicate(path)."""
        out = []
        for e in self.events:
            if e["cat"] != "POSIX":
                continue
            fh = e.get("args", {}).get("fhash")
            if fh is not None and predicate(self.files.get(fh, "")):
                out.append(e)
        return out

    def path_of(self, e):
        return self.files.get(e.get("args", {}).get("fhash"))


class DlioRun:
    def __init__(self, root, ranks, ctx):
        self.root = root
        self.ranks = ranks
        self.ctx = ctx
        self.data = root / "data"
        self.ckpt = root / "checkpoints"
        self.output = root / "output"
        self.log_prefix = root / "dft" / "dlio"  # DFTRACER_LOG_FILE, as a user sets it
        self.proc = None
        self.seconds = None

    def command(self):
        exe = Path(sys.executable).with_name("dlio_benchmark")
        cmd = [
            str(exe),
            f"--config-dir={HERE / 'configs'}",
            f"workload={WORKLOAD}",
            f"++workload.dataset.data_folder={self.data}",
            f"++workload.checkpoint.checkpoint_folder={self.ckpt}",
            f"++workload.output.folder={self.output}",
            f"++workload.reader.multiprocessing_context={self.ctx}",
            f"hydra.run.dir={self.root / 'hydra'}",
        ]
        if self.ranks > 1:
            passed = [a for v in PASSED if v in self.env() for a in ("-x", v)]
            cmd = ["mpirun.openmpi", "-np", str(self.ranks), "--bind-to", "none", "--allow-run-as-root",
                   *passed, *cmd]
        return cmd

    def env(self):
        e = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k not in RANK_VARS}
        e["DFTRACER_ENABLE"] = "1"
        e["DFTRACER_LOG_FILE"] = str(self.log_prefix)
        # The dataset only, as a user points the tracer at their data: DLIO itself then adds
        # the checkpoint folder through initialize_log(data_dir="<data>:...:<checkpoints>").
        e["DFTRACER_DATA_DIR"] = str(self.data)
        e["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        e["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        e["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        if shutil.which("mpirun.openmpi"):
            e["MPI4PY_MPIABI"] = "openmpi"
        return e

    def run(self):
        t0 = time.monotonic()
        self.proc = subprocess.run(
            self.command(), cwd=self.root, env=self.env(), capture_output=True, text=True, timeout=900
        )
        self.seconds = time.monotonic() - t0
        (self.root / "stdout.txt").write_text(self.proc.stdout)
        (self.root / "stderr.txt").write_text(self.proc.stderr)
        print(f"dlio_benchmark ({self.ranks} rank(s), {self.ctx}): {self.seconds:.1f} s, exit {self.proc.returncode}")
        return self

    def describe(self):
        return (
            f"exit {self.proc.returncode}\n--- stdout (end)\n{self.proc.stdout[-3000:]}"
            f"\n--- stderr (end)\n{self.proc.stderr[-5000:]}"
        )

    # What the run did, from outside the tracer.
    def dataset(self):
        return sorted(str(p) for p in (self.data / "train").glob("*.npz"))

    def checkpoints(self):
        return sorted(p for p in self.ckpt.iterdir() if p.is_file()) if self.ckpt.exists() else []

    def dlio_log(self):
        return (self.output / "dlio.log").read_text()

    def per_epoch_stats(self):
        return json.loads((self.output / "per_epoch_stats.json").read_text())

    # The trace files: every one under the run's directory, wherever the tracer put it.
    def trace_files(self):
        return sorted(p for p in self.root.rglob("*.pfw*"))

    def traces(self):
        return [Trace(p) for p in self.trace_files()]


@pytest.fixture(scope="session")
def dlio_run(tmp_path_factory):
    """dlio_run(ranks, ctx) -> DlioRun: one run per configuration for the whole session."""
    cache = {}

    def get(ranks, ctx):
        key = (ranks, ctx)
        if key not in cache:
            root = tmp_path_factory.mktemp(f"dlio-{ranks}-{ctx}")
            cache[key] = DlioRun(root, ranks, ctx).run()
        return cache[key]

    return get


def validate(paths):
    """dftracer-utils' validator (the `utils` step's venv) on every trace file, when CI gives it."""
    tool = os.environ.get("DFTRACER_VALIDATE")
    if not tool:  # a run by hand; scripts/test.sh always sets it
        pytest.skip("DFTRACER_VALIDATE not set (scripts/test.sh sets it)")
    assert os.path.exists(tool), f"{tool} missing: scripts/test.sh utils makes it"
    paths = [str(p) for p in paths]
    proc = subprocess.run([tool, "--files", *paths], capture_output=True, text=True, timeout=300)
    summary = [l for l in proc.stdout.splitlines() if l.startswith("Validated")]
    assert proc.returncode == 0 and summary and " 0 failed" in summary[-1], (
        f"dftracer_validate {paths}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    )
