"""The torch step's tests (scripts/test.sh torch) run in .venv-torch: our wheel, pytest, numpy
and PyTorch from PyPI (installed once into .venv-torch-site). They reuse the helpers of
../tests/conftest.py (run a real program, read its real trace files back)."""

import importlib.util
import os
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "dft_test_helpers", Path(__file__).resolve().parent.parent / "tests" / "conftest.py"
)
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

run = helpers.run  # the fixture
Run = helpers.Run
self_contained = helpers.self_contained


def validate(paths):
    """dftracer-utils' validator (the `utils` step's venv) on every trace file, when CI gives it."""
    import subprocess

    tool = os.environ.get("DFTRACER_VALIDATE")
    if not tool:  # a run by hand; scripts/test.sh always sets it
        return
    assert os.path.exists(tool), f"{tool} missing: scripts/test.sh utils makes it"
    paths = [str(p) for p in paths]
    proc = subprocess.run([tool, "--files", *paths], capture_output=True, text=True, timeout=300)
    summary = [l for l in proc.stdout.splitlines() if l.startswith("Validated")]
    assert proc.returncode == 0 and summary and " 0 failed" in summary[-1], (
        f"dftracer_validate {paths}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    )
