"""Our wheel next to pydftracer 2.0.6 (from PyPI), installed in either order and uninstalled
again, as a package that depends on `pydftracer` (DLIO) makes pip do: `dftracer.python` stays
ours and working, `python -m dftracer version` says which layer is active, and pydftracer's own
layer over our native module (DFTRACER_PYTHON_LAYER=pydftracer) survives DLIO's exit path."""

import gzip
import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

from test_compat_pydftracer import _wheel

APP = """
import os, sys
import dftracer.python as layer
from dftracer.python import dftracer, dft_fn
print("layer", layer.__file__)
df = dft_fn("train")
log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)

@df.log
def step(epoch):
    return epoch

class Bench:
    @df.log
    def finalize(self):
        # DLIO finalizes inside a decorated method: pydftracer's wrapper then calls
        # get_time() and log_event() after finalize().
        dftracer.get_instance().finalize()

for i in range(3):
    step(i)
Bench().finalize()
print("returned normally")
"""


def _venv(tmp_path: Path, name: str) -> tuple:
    d = tmp_path / name
    venv.create(d, with_pip=True)
    py = str(d / "bin" / "python")
    pip = [py, "-m", "pip", "-q", "--disable-pip-version-check"]
    return py, pip


def _run(py: str, tmp_path: Path, tag: str, layer: str = "") -> tuple:
    out = tmp_path / f"out-{tag}"
    out.mkdir()
    (tmp_path / "app.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    env.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=str(out / "trace"))
    if layer:
        env["DFTRACER_PYTHON_LAYER"] = layer
    p = subprocess.run([py, str(tmp_path / "app.py")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "returned normally" in p.stdout, p.stdout
    (trace,) = out.glob("*.pfw.gz")
    recs = [json.loads(l) for l in gzip.open(trace, "rt")]
    names = [r["name"] for r in recs if r.get("ph") == 1 and r["cat"] != "dftracer"]
    assert names.count("step") == 3, names
    assert recs[-1]["name"] == "end", "the trace is complete"
    return p, names


def _version(py: str, layer: str = "") -> str:
    env = dict(os.environ, DFTRACER_PYTHON_LAYER=layer) if layer else dict(os.environ)
    return subprocess.run([py, "-m", "dftracer", "version"], check=True, capture_output=True, text=True, env=env).stdout


@pytest.mark.parametrize("order", ["ours_first", "pydftracer_first"])
def test_either_install_order_then_uninstalling_pydftracer_leaves_ours_working(tmp_path, order):
    py, pip = _venv(tmp_path, "env")
    ours = pip + ["install", "--no-deps", str(_wheel(tmp_path))]
    theirs = pip + ["install", "--no-deps", "pydftracer==2.0.6", "typing_extensions"]
    for cmd in ([ours, theirs] if order == "ours_first" else [theirs, ours]):
        subprocess.run(cmd, check=True)
    v = _version(py)
    assert "python layer: ours (" in v and "pydftracer 2.0.6 is installed too" in v, v
    p, names = _run(py, tmp_path, "both")
    assert "_layer" in p.stdout.split("layer ", 1)[1].splitlines()[0], p.stdout
    assert names.count("Bench.finalize") == 0, "finalized inside: its own event is after the end"
    # pydftracer's own files, chosen explicitly, over our native module: DLIO's exit path
    # (finalize inside a decorated method) returns normally; the late event is dropped.
    v = _version(py, "pydftracer")
    assert "python layer: pydftracer 2.0.6's (" in v and "unset it to use ours" in v, v
    p, _ = _run(py, tmp_path, "theirs", layer="pydftracer")
    assert "_layer" not in p.stdout.split("layer ", 1)[1].splitlines()[0], p.stdout
    assert "an event was logged after finalize(): dropped" in p.stderr, p.stderr
    # Uninstalling pydftracer deletes its files (same names as a layer in dftracer/python):
    # ours is untouched.
    subprocess.run(pip + ["uninstall", "-y", "pydftracer"], check=True)
    v = _version(py)
    assert "python layer: ours (" in v and "pydftracer" not in v, v
    _run(py, tmp_path, "after")
