"""pydftracer 2.0.6 (from PyPI, its own Python layer) runs unchanged on our native module."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = """
from dftracer.python import dftracer, dft_fn as DFTracerFn
df = DFTracerFn("train")
log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
@df.log
def read(path, size): return size
class Loader:
    @df.log_init
    def __init__(self, path): self.path = path
with DFTracerFn("io", name="read_loop"):
    for i in range(3): read("p", i)
Loader("x")
# A value whose type changes between update() calls stays in two of pydftracer's typed dicts.
with DFTracerFn("io", name="upd") as u:
    u.update(args={"loss": 1})
    u.update(args={"loss": 0.25})
t = dftracer.get_instance().get_time()
dftracer.get_instance().log_event(name="advance_job", cat="emu", start_time=t, duration=5,
    int_args={"job_id": (0, 7)}, string_args={"mhost": (0, "node3")})
log.finalize()
"""


def test_pydftracer_2_0_6_over_our_native_module(tmp_path, pydftracer_venv):
    py = pydftracer_venv
    # Ours serves dftracer.python whatever was installed after it; DFTRACER_PYTHON_LAYER picks
    # pydftracer's files.
    layer = dict(os.environ, DFTRACER_PYTHON_LAYER="pydftracer")
    site = subprocess.run(
        [str(py), "-c", "import dftracer.python, dftracer.dftracer as d; print(dftracer.python.__file__, d.__file__)"],
        check=True, capture_output=True, text=True, env=layer,
    ).stdout
    assert ".so" in site
    assert "_layer" not in site.split()[0] and (Path(site.split()[0]).parent / "ai_common.py").exists(), \
        "pydftracer's package is the one imported"
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "app.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    env.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=str(out / "trace"), DFTRACER_PYTHON_LAYER="pydftracer")
    subprocess.run([str(py), str(tmp_path / "app.py")], check=True, env=env, cwd=tmp_path)
    files = list(out.glob("*.pfw.gz"))
    assert len(files) == 1, files
    recs = [json.loads(l) for l in gzip.open(files[0], "rt")]
    ev = [r for r in recs if r.get("ph") == 1 and r["cat"] != "dftracer"]
    names = [e["name"] for e in ev]
    assert names.count("read") == 3 and "read_loop" in names and "Loader.__init__" in names
    job = [e for e in ev if e["name"] == "advance_job"][0]
    assert job["args"]["job_id"] == 7 and job["args"]["mhost"] == "node3"
    upd = [e for e in ev if e["name"] == "upd"][0]
    assert upd["args"]["loss"] == 0.25 and upd["args"]["loss_int"] == 1, upd
    end = [r for r in recs if r["name"] == "end"][0]
    assert end["args"]["used"]["python_function"] == 1
