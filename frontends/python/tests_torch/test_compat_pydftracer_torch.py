"""pydftracer 2.0.6's own PyTorch modules (`dftracer.python.dynamo`, `dftracer.python.torch`,
from PyPI, unchanged) over our native module, with torch installed: what a user who keeps
pydftracer's Python layer and swaps in our native module gets."""

import collections
import gzip
import json
import os
import subprocess
import venv
from pathlib import Path

SCRIPT = """
import torch
from dftracer.python import dftracer
from dftracer.python.dynamo import dynamo
from dftracer.python.torch import trace_handler

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
compiled = dynamo.compile(model)
for _ in range(3):
    compiled(torch.randn(4, 8)).sum().backward()
a = torch.randn(32, 32)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], on_trace_ready=trace_handler):
    for _ in range(5):
        torch.mm(a, a)
log.finalize()
"""


def test_pydftracer_torch_modules_over_our_native_module(tmp_path):
    wheel, site = os.environ["DFT_WHEEL"], os.environ["DFT_TORCH_SITE"]
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + [wheel], check=True)
    subprocess.run(pip + ["--no-deps", "pydftracer==2.0.6", "typing_extensions"], check=True)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "torch-site.pth").write_text(site + "\n")
    where = subprocess.run(
        [str(py), "-c", "import sys, dftracer.python.dynamo, dftracer.dftracer as d; "
         "print(sys.modules['dftracer.python.dynamo'].__file__, d.__file__)"],
        check=True, capture_output=True, text=True,
        env={**os.environ, "DFTRACER_ENABLE": "0", "DFTRACER_PYTHON_LAYER": "pydftracer"},
    ).stdout.split()
    assert "_layer" not in where[0] and (Path(where[0]).parent / "ai_common.py").exists(), \
        "pydftracer's package is the one imported"
    assert where[1].endswith(".so")
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "app.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    env.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=str(out / "trace"), DFTRACER_PYTHON_LAYER="pydftracer")
    subprocess.run([str(py), str(tmp_path / "app.py")], check=True, env=env, cwd=tmp_path, timeout=600)
    (trace,) = out.glob("*.pfw.gz")
    recs = [json.loads(line) for line in gzip.open(trace, "rt")]
    ev = [r for r in recs if r.get("ph") == 1 and r["cat"] != "dftracer"]
    ops = [e for e in ev if e["cat"] == "dynamo"]
    # Linear, ReLU, Linear: AOT Autograd's forward graph has at least addmm, relu, addmm per run.
    assert sum(e["name"] == "function.addmm.default" for e in ops) >= 2 * 3, sorted({e["name"] for e in ops})
    # pydftracer records torch.is_grad_enabled() while AOT Autograd traces the graph (under
    # no_grad): its value is pydftracer's, ours only has to carry it as an integer.
    assert all(e["args"]["grad_enabled"] in (0, 1) for e in ops), collections.Counter(
        (e["name"], e["args"].get("grad_enabled")) for e in ops
    )
    mm = [e for e in ev if e["cat"] == "PP" and e["name"] == "aten::mm"]
    assert len(mm) == 5
    end = next(r for r in recs if r["name"] == "end")
    # pydftracer's module-level `dynamo` object marks itself used when it is made, at import,
    # before initialize_log, and pydftracer's own mark_used drops marks made before it has a
    # logger (the reference 2.2.0 writes no `used` at all): only the profiler's mark, made
    # during the run, reaches the native module.
    assert end["args"]["used"]["torch_profiler"] == 1
