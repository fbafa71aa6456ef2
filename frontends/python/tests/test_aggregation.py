"""SELECTIVE aggregation with the reference's rule language, run in real programs: which
events become ph 3 records, and what the end record says was in force."""

import pytest


def dftracer_lines(stderr):
    return [l for l in stderr.splitlines() if "DFTRACER" in l]

EVENTS = """
    import dftracer.dftracer as d
    d.initialize()
    t = d.get_time()
    for n, c, du in [("read_a", "POSIX", 5), ("write_b", "POSIX", 500), ("ev", "CAT", 50),
                     ("op", "app", 5000), ("stat64", "POSIX", 3), ("fstat", "POSIX", 9)]:
        d.log_event(n, c, t, du, {"i": (0, du)}, {"x": (0, "v" if n == "ev" else "w")}, {})
    d.finalize()
    """


def selective(run, tmp_path, rules):
    env = {"DFTRACER_ENABLE_AGGREGATION": "1", "DFTRACER_AGGREGATION_TYPE": "SELECTIVE"}
    path = None
    if rules is not None:
        path = tmp_path / "rules.yaml"
        path.write_text(rules)
        env["DFTRACER_AGGREGATION_FILE"] = str(path)
    r = run(EVENTS, env=env)
    folded = sorted(x["name"] for x in r.records() if x.get("ph") == 3)
    plain = sorted(x["name"] for x in r.events())
    end = next(x for x in r.records() if x["name"] == "end")
    return r, folded, plain, end["args"]["cfg"], path


@pytest.mark.parametrize(
    "rule,picked",
    [
        # app: the executable's name (this script: main.py), as the reference's.
        ("name LIKE '*stat*' AND app LIKE 'main*'", ["fstat", "stat64"]),
        ("name LIKE '*stat*' AND app LIKE 'test*'", []),
        ("app == 'main.py'", ["ev", "fstat", "op", "read_a", "stat64", "write_b"]),
        # tags.<key>: the event's arg; "" for an event without it.
        ("tags.x == 'v'", ["ev"]),
        ("tags.x LIKE 'w*' AND cat == 'POSIX'", ["fstat", "read_a", "stat64", "write_b"]),
        ("tags.nope == ''", ["ev", "fstat", "op", "read_a", "stat64", "write_b"]),
        ("tags.i > 100", ["op", "write_b"]),
        # No launcher rank in this process: every test of `rank` is false.
        ("rank == 0 OR rank != 0", []),
    ],
)
def test_the_reference_s_fields_pick_the_events(run, tmp_path, rule, picked):
    r, folded, plain, cfg, path = selective(run, tmp_path, f'inclusion:\n  - "{rule}"\n')
    assert not dftracer_lines(r.stderr), r.stderr
    assert folded == picked
    assert sorted(folded + plain) == ["ev", "fstat", "op", "read_a", "stat64", "write_b"]
    assert cfg["aggregation_enable"] == 1 and cfg["aggregation_type"] == "SELECTIVE"
    assert cfg["aggregation_file"] == str(path)


def test_selective_without_a_rules_file_aggregates_every_event(run, tmp_path):
    # What the reference 2.2.0 does: no error, every event folded.
    r, folded, plain, cfg, _ = selective(run, tmp_path, None)
    assert not dftracer_lines(r.stderr), r.stderr
    assert folded == ["ev", "fstat", "op", "read_a", "stat64", "write_b"] and not plain
    assert cfg["aggregation_enable"] == 1 and cfg["aggregation_type"] == "SELECTIVE"
    assert cfg["aggregation_file"] == ""


def test_a_bad_rules_file_says_aggregation_was_off(run, tmp_path):
    r, folded, plain, cfg, path = selective(run, tmp_path, "inclusion:\n  - \"size > 5\"\n")
    lines = dftracer_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"[DFTRACER ERROR] DFTRACER_AGGREGATION_FILE={path}:"), r.stderr
    assert "unknown field `size`" in lines[0] and lines[0].endswith("aggregation is off")
    assert not folded and len(plain) == 6
    # The end record says what was done, not what was asked.
    assert cfg["aggregation_enable"] == 0 and "aggregation_file" not in cfg
