"""DLIO as users install it: `pip install dlio-benchmark==2.0.0` with its dependencies pulls
pydftracer==1.0.2 (pinned), whose wheel writes files at paths our wheel installs too:
`dftracer/__init__.py` (empty), `dftracer/logger.py` (pydftracer 1.x's, over the reference's
native module `pydftracer`) and `dftracer/lib/libdftracer_preload.so` (the reference's
library). Installed in either order, and after `pip uninstall pydftracer`, `dftracer.logger`
(what DLIO imports), `dftracer.python` and the preload library must stay ours.

Each case is a fresh venv with both wheels installed --no-deps (pydftracer's from PyPI, ours
from DFT_WHEEL). The other tests of this step run DLIO installed --no-deps, without
pydftracer: this is the one that looks at what its pinned dependency does to ours."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROBE = r"""
import json, os
out = {}
try:
    import dftracer
    out["init"] = dftracer.__file__
except Exception as e:
    out["init"] = repr(e)
for mod in ("dftracer.logger", "dftracer.python"):
    try:
        m = __import__(mod, fromlist=["_"])
        out[mod] = m.__file__
    except Exception as e:
        out[mod] = repr(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    ours = os.environ.get("DFT_WHEEL")
    if not ours:
        pytest.skip("DFT_WHEEL not set (scripts/test.sh dlio sets it)")
    d = tmp_path_factory.mktemp("pydftracer-1.0.2")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
         "pydftracer==1.0.2", "-d", str(d)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (theirs,) = d.glob("pydftracer-1.0.2-*.whl")
    return Path(ours), theirs


def pip(py, *args):
    """This venv's pip acting on the venv of `py` (pip --python)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"pip {args}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"


def venv(root):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / "bin" / "python"


def probe(py):
    proc = subprocess.run([str(py), "-c", PROBE], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def assert_ours(py, ours_whl, when):
    got = probe(py)
    layer = os.sep + os.path.join("dftracer", "_layer") + os.sep
    assert layer in got["dftracer.logger"] and layer in got["dftracer.python"], (when, got)
    # our package code runs (dftracer/_rs_init.py, through our .pth hook: another wheel's
    # dftracer/__init__.py is not ours), and the preload library is our wheel's, byte for byte
    init = Path(got["init"] or "")
    assert init.name == "_rs_init.py", (when, got)
    with zipfile.ZipFile(ours_whl) as z:
        want = z.read("dftracer/_native/lib/libdftracer_preload.so")
    got_lib = subprocess.run([str(py), "-m", "dftracer", "preload"], capture_output=True, text=True, timeout=60)
    assert got_lib.returncode == 0, (when, got_lib.stderr)
    assert Path(got_lib.stdout.strip()).read_bytes() == want, (
        f"{when}: python -m dftracer preload is not our wheel's library"
    )


def test_ours_then_dlio_s_pydftracer(wheels, tmp_path):
    """Ours installed first, then DLIO's pinned pydftracer 1.0.2 (what `pip install
    dlio-benchmark` does in an environment that has ours): it overwrites `dftracer/__init__.py`
    with its empty one and writes `dftracer/logger.py` and `dftracer/lib/`; ours runs from
    `_rs_init.py`, `_layer/` and `_native/`, which no other wheel has."""
    ours, theirs = wheels
    py = venv(tmp_path / "v")
    pip(py, "install", "--no-deps", str(ours))
    assert_ours(py, ours, "ours alone")
    pip(py, "install", "--no-deps", str(theirs))
    assert_ours(py, ours, "ours, then pydftracer 1.0.2")


def test_dlio_s_pydftracer_then_ours_then_uninstalled(wheels, tmp_path):
    """pydftracer 1.0.2 first, ours after (ours overwrites the shared files), then
    `pip uninstall pydftracer` (which deletes every file its RECORD lists, shared ones too:
    `dftracer/__init__.py` among them)."""
    ours, theirs = wheels
    py = venv(tmp_path / "v")
    pip(py, "install", "--no-deps", str(theirs))
    pip(py, "install", "--no-deps", str(ours))
    assert_ours(py, ours, "pydftracer 1.0.2, then ours")
    pip(py, "uninstall", "-y", "pydftracer")
    assert_ours(py, ours, "pydftracer 1.0.2, then ours, then pydftracer uninstalled")
