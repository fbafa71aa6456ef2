"""Every fenced ```python, ```sh and ```bash block of every README*.md in the repository runs
and succeeds, so the docs cannot drift from the code. `make test` runs this (step `docs`);
alone: `make test-docs`, or `python -m pytest tests/test_readme_snippets.py` from a venv with
the wheel installed after a release build.

- A block preceded by `<!-- not-run: REASON -->` (the line right before its fence) is not run;
  the reason is required and says why (recursion into `make test`, minutes of benchmarks,
  a cluster, ...). Other languages (c, cpp, cmake, text) are never run.
- The blocks of one README run in order, in one scratch directory (a README reads top to
  bottom: a later block may read the traces an earlier one wrote). The directory holds
  symlinks to the repository's top-level entries, so `./frontends/python`,
  `scripts/native-lib.sh`, `examples/...` and `target/release/...` resolve as from the root of
  a clone, while everything a block writes (traces, programs, install prefixes) stays there.
- Python blocks run with this interpreter (the venv with the wheel) and `DFTRACER_ENABLE=1`
  (the README says to run annotated code with it). Shell blocks run with `bash -euo pipefail`
  and PATH starting with this venv's bin (python, pip), `.venv-utils/bin` (dftracer_validate,
  dftracer_event_count, when `make test` made it) and `target/release` (dftracer_service).
- A block fails when it exits non-zero, or prints `Traceback` or `[DFTRACER ERROR]`.
- Every `make TARGET` named in a Markdown file, script or CI file is a target of the Makefile
  with a `##` help line.
- Every binary of the workspace answers `--version` (with the crate's version) and `--help`,
  and so does `python -m dftracer`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", "target", "node_modules", "__pycache__"}
RUN_LANGS = {"python": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```+\s*([A-Za-z0-9_+-]*)")


def _walk(root: Path, pattern):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".venv") and not (Path(dirpath) / d / "CACHEDIR.TAG").exists()
        )
        for f in sorted(filenames):
            if pattern(f):
                yield Path(dirpath) / f


def readmes():
    return [p for p in _walk(ROOT, lambda f: f.startswith("README") and f.endswith(".md")) if "fuzz/target" not in str(p)]


def blocks(path: Path):
    """[(line of the fence, language, code, not-run reason or None)] of the fenced blocks."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        prev = lines[start - 1] if start > 0 else ""
        reason = NOT_RUN.match(prev)
        out.append((start + 1, lang, "\n".join(body) + "\n", reason.group(1) if reason else None))
    return out


def _cases():
    cases = []
    for path in readmes():
        rel = str(path.relative_to(ROOT))
        for line, lang, code, reason in blocks(path):
            if lang in RUN_LANGS:
                cases.append(pytest.param(rel, line, RUN_LANGS[lang], code, reason, id=f"{rel}:{line}"))
    return cases


_dirs: dict = {}


def _scratch(readme: str) -> Path:
    """The scratch directory of one README (created on its first block, removed at exit)."""
    if readme not in _dirs:
        d = Path(tempfile.mkdtemp(prefix="dft-readme-"))
        for entry in ROOT.iterdir():
            if entry.name != ".git":
                (d / entry.name).symlink_to(entry)
        _dirs[readme] = d
    return _dirs[readme]


@pytest.fixture(scope="session", autouse=True)
def _cleanup():
    yield
    for d in _dirs.values():
        shutil.rmtree(d, ignore_errors=True)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    path = [str(Path(sys.executable).parent)]
    utils = ROOT / ".venv-utils" / "bin"
    if utils.is_dir():
        path.append(str(utils))
    path += [str(ROOT / "target" / "release"), env.get("PATH", "/usr/bin:/bin")]
    env["PATH"] = ":".join(path)
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.mark.parametrize("readme,line,lang,code,reason", _cases())
def test_readme_block(readme, line, lang, code, reason):
    if reason is not None:
        assert reason, f"{readme}:{line}: <!-- not-run: --> needs a reason"
        pytest.skip(f"not-run: {reason}")
    work = _scratch(readme)
    env = _env()
    if lang == "python":
        env["DFTRACER_ENABLE"] = "1"
        script = work / f".block-{line}.py"
        script.write_text(code)
        cmd = [sys.executable, str(script)]
    else:
        script = work / f".block-{line}.sh"
        script.write_text(code)
        cmd = ["bash", "-euo", "pipefail", str(script)]
    p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    shown = f"{readme}:{line} ({lang}) in {work}\n--- block:\n{code}--- stdout:\n{p.stdout}--- stderr:\n{p.stderr}"
    assert p.returncode == 0, f"exit {p.returncode}: {shown}"
    for bad in ("Traceback (most recent call last)", "[DFTRACER ERROR]"):
        assert bad not in p.stdout + p.stderr, shown


def test_every_readme_is_found_and_has_blocks():
    found = {str(p.relative_to(ROOT)) for p in readmes()}
    assert "README.md" in found and "frontends/service/README.md" in found, found
    assert any(c.values[2] == "python" for c in _cases()), "no python block found"


def test_not_run_marks_have_a_reason():
    for path in readmes():
        for n, text in enumerate(path.read_text().splitlines(), 1):
            if "not-run" in text:
                m = NOT_RUN.match(text)
                assert m and m.group(1), f"{path}:{n}: write <!-- not-run: REASON -->"


def _make_targets():
    text = (ROOT / "Makefile").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^([a-z][a-z-]*):[^#\n]*(?:## (.*))?$", text, re.M)}


def test_every_make_target_named_anywhere_exists_with_help():
    targets = _make_targets()
    files = list(_walk(ROOT, lambda f: f.endswith((".md", ".sh", ".py", ".yml", ".yaml")) or f in ("run", "Makefile")))
    named = {}
    for f in files:
        if "fuzz/target" in str(f):
            continue
        try:
            text = f.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        # `make TARGET` in backticks (Markdown, comments), or a command line starting with make
        for m in re.finditer(r"(?:`|^[ \t]*|[;&|(][ \t]*)make[ \t]+([a-z][a-z-]*)\b(?![.-])", text, re.M):
            named.setdefault(m.group(1), str(f.relative_to(ROOT)))
    missing = {t: where for t, where in named.items() if t not in targets}
    assert not missing, f"make targets named but not in the Makefile: {missing}"
    no_help = [t for t, h in targets.items() if not h]
    assert not no_help, f"targets without a ## help line: {no_help}"
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for t in targets:
        assert re.search(rf"^\s+{re.escape(t)}\s", out.stdout, re.M), (t, out.stdout)


def _binaries():
    meta = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    out = []
    for pkg in json.loads(meta.stdout)["packages"]:
        for t in pkg["targets"]:
            if "bin" in t["kind"]:
                out.append((t["name"], pkg["version"]))
    return sorted(out)


@pytest.mark.parametrize("name,version", _binaries())
def test_every_binary_answers_version_and_help(name, version):
    exe = ROOT / "target" / "release" / name
    if not exe.exists():
        pytest.skip(f"{exe} not built (the build step of make test builds the binaries)")
    for flag in ("--version", "--help"):
        p = subprocess.run([str(exe), flag], capture_output=True, text=True, timeout=30, cwd=tempfile.gettempdir())
        assert p.returncode == 0, (flag, p.stdout, p.stderr)
        assert p.stdout.strip(), (flag, p.stderr)
    p = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30)
    assert version in p.stdout, p.stdout


def test_the_python_package_answers_version_and_help():
    import dftracer

    assert dftracer.__version__
    for args in (["--version"], ["--help"]):
        p = subprocess.run([sys.executable, "-m", "dftracer", *args], capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout.strip(), (args, p.stdout, p.stderr)
    p = subprocess.run([sys.executable, "-m", "dftracer", "--version"], capture_output=True, text=True)
    assert p.stdout.strip() == dftracer.__version__
