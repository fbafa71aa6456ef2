"""The .pyi stubs name exactly what the native module exports."""

import ast
from pathlib import Path

import dftracer.dftracer as native

STUB = Path(native.__file__).with_name("dftracer.pyi")


def test_stubs_match_the_module():
    assert STUB.exists(), STUB
    tree = ast.parse(STUB.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = {n for n in dir(native) if not n.startswith("__")}
    assert stubbed == exported, (sorted(stubbed - exported), sorted(exported - stubbed))
    import dftracer

    assert (Path(dftracer.__file__).parent / "py.typed").exists()
