"""What the trace and stderr say must be true: lone surrogates, overlapping arg dicts, bad
knobs, a second initialize, log prefixes that cannot hold files, missing directories, a
failed start, and the environment children inherit."""

import os

import pytest

FFFD = "\ufffd"


def dftracer_lines(stderr):
    return [l for l in stderr.splitlines() if "DFTRACER" in l]


def test_lone_surrogates_are_written_as_replacement_characters(run):
    r = run(
        """
        import dftracer.dftracer as d
        from dftracer.python import dft_fn
        d.log_event("n\\udc80x", "c\\ud800", 1, 2, {"k\\udfff": 1}, {"s": "v\\udc80w\\ud800"})
        d.log_metadata_event("m\\udc80", "v\\udc80")
        with dft_fn("ctx\\udc80", name="region\\udc80") as r:
            r.update(args={"u\\udc80": "w\\udc80"})
        df = dft_fn("deco\\udc80")
        @df.log(name="f\\udc80")
        def f(): return 1
        f()
        d.finalize()
        """
    )
    ev = {e["cat"]: e for e in r.events()}
    e = ev["c" + FFFD]
    assert e["name"] == "n" + FFFD + "x"
    assert e["args"]["k" + FFFD] == 1
    assert e["args"]["s"] == "v" + FFFD + "w" + FFFD
    ctx = ev["ctx" + FFFD]
    assert ctx["name"] == "region" + FFFD and ctx["args"]["u" + FFFD] == "w" + FFFD
    assert ev["deco" + FFFD]["name"] == "f" + FFFD
    cm = [x for x in r.records() if x.get("name") == "CM" and x["args"]["name"] == "m" + FFFD]
    assert cm and cm[0]["args"]["value"] == "v" + FFFD


def test_same_key_in_two_arg_dicts_keeps_every_value(run):
    r = run(
        """
        import dftracer.dftracer as d
        from dftracer.python import dftracer
        d.log_event("three", "C", 1, 2, {"k": 1}, {"k": "s"}, {"k": 0.5})
        d.log_event("taken", "C", 1, 2, {"k": 1, "k_int": 2}, None, {"k": 0.5})
        # pydftracer's own signature (int, float, string), as its dft_fn.flush() calls it
        dftracer.get_instance().log_event("py", "C", 1, 2, int_args={"loss": (0, 1)},
                                          float_args={"loss": (0, 0.25)})
        d.finalize()
        """
    )
    ev = {e["name"]: e["args"] for e in r.events()}
    # The reference keeps the last dict's value (order int, string, float) under the key.
    assert {k: v for k, v in ev["three"].items() if k != "hhash"} == {"k_int": 1, "k_str": "s", "k": 0.5}
    assert {k: v for k, v in ev["taken"].items() if k != "hhash"} == {"k_int_int": 1, "k_int": 2, "k": 0.5}
    assert ev["py"]["loss"] == 0.25 and ev["py"]["loss_int"] == 1


BAD_KNOBS = [
    # (variable, bad value, what the warning says is used, kind)
    ("DFTRACER_INC_METADATA", "maybe", "using 1", "bool"),
    ("DFTRACER_TSC", "perhaps", "using 1", "bool"),
    ("DFTRACER_COMPRESSION_LEVEL", "99", "using 10", "int range"),
    ("DFTRACER_RING_SIZE", "5", "using 524288", "int range"),
    ("DFTRACER_FLUSH_INTERVAL_MS", "0", "using 1", "int range"),
    ("DFTRACER_WRITE_BUFFER_SIZE", "1e6", "using 1048576", "int"),
    ("DFTRACER_GOTCHA_PRIORITY", "high", "using 1", "int"),
    ("DFTRACER_LOG_LEVEL", "LOUD", "using WARN", "enum"),
    ("DFTRACER_INIT", "garbage", "using NONE", "enum"),
    ("DFTRACER_AGGREGATION_TYPE", "PARTIAL", "using FULL", "enum"),
    ("DFTRACER_TIME_METRIC", "HOURS", "using US", "unit"),
]


@pytest.mark.parametrize("var,value,used,kind", BAD_KNOBS, ids=[k[0] for k in BAD_KNOBS])
def test_an_invalid_knob_warns_once_with_the_value_used(run, var, value, used, kind):
    # Import both modules, read the config lazily (an event) and explicitly (initialize_log,
    # get_config): the warning still comes once.
    r = run(
        """
        import dftracer.dftracer as d
        d.log_event("before", "C", 1, 1)
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None)
        log.get_config("LOG_LEVEL")
        with dft_fn("X", name="r"): pass
        log.finalize()
        """,
        env={var: value},
    )
    warn = [l for l in r.stderr.splitlines() if l.startswith("[DFTRACER WARN]")]
    assert len(warn) == 1, r.stderr
    assert f'{var}="{value}"' in warn[0] and used in warn[0], warn[0]
    assert len(r.events("r")) == 1
    end = [x for x in r.records() if x["name"] == "end"][0]
    if var == "DFTRACER_COMPRESSION_LEVEL":
        assert end["args"]["cfg"]["compression_level"] == 10
    if var == "DFTRACER_TIME_METRIC":
        cm = [x for x in r.records() if x.get("name") == "CM" and x["args"]["name"] == "time_metric"]
        assert cm[0]["args"]["value"] == "US"


def test_every_bad_knob_at_once_one_line_each(run):
    env = {v: bad for v, bad, _, _ in BAD_KNOBS}
    r = run(
        """
        import dftracer.dftracer as d
        from dftracer.python import dftracer
        dftracer.initialize_log()
        d.log_event("e", "C", 1, 1)
        """,
        env=env,
    )
    warn = [l for l in r.stderr.splitlines() if l.startswith("[DFTRACER WARN]")]
    assert sorted(l.split("=")[0].split()[-1] for l in warn) == sorted(env), r.stderr


def test_second_initialize_with_another_path_says_it_is_ignored(run):
    r = run(
        """
        import os
        import dftracer.dftracer as d
        out = os.environ["OUT"]
        d.initialize(out + "/first.pfw")
        d.log_event("e", "C", 1, 1)
        d.initialize(out + "/first.pfw")        # the same file again: silent
        d.initialize(out + "/second.pfw")
        d.log_event("e2", "C", 1, 1)
        d.finalize()
        """
    )
    lines = dftracer_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    assert "already tracing to" in lines[0] and "/first-" in lines[0], lines[0]
    assert "second.pfw" in lines[0] and lines[0].endswith("ignored"), lines[0]
    names = [f.name for f in r.files()]
    assert len(names) == 1 and names[0].startswith("first-"), names
    assert len(r.events()) == 2


def test_initialize_after_events_renames_and_after_finalize_is_ignored_each_in_one_line(run):
    r = run(
        """
        import os
        import dftracer.dftracer as d
        d.log_event("early", "C", 1, 1)
        d.flush()
        d.initialize(os.environ["OUT"] + "/named.pfw")   # renames the file written so far
        d.finalize()
        d.initialize(os.environ["OUT"] + "/late.pfw")
        """
    )
    lines = dftracer_lines(r.stderr)
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("[DFTRACER INFO] initialize: tracing had started before it"), lines
    assert lines[0].endswith("applied: log file prefix " + str(r.out / "named")), lines
    assert "finalized" in lines[1] and "late.pfw" in lines[1], r.stderr
    assert [f.name.split("-")[0] for f in r.files()] == ["named"]


@pytest.mark.parametrize(
    "prefix,what",
    [("/dev/full", "a character device"), ("/proc/self/trace", "proc filesystem"),
     ("{out}/file/t", "not a directory")],
)
@pytest.mark.parametrize("how", ["env", "initialize"])
def test_a_prefix_that_cannot_hold_trace_files_is_refused_in_one_line(run, tmp_path, prefix, what, how):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "file").write_text("a regular file")
    prefix = prefix.format(out=out)
    code = """
        import dftracer.dftracer as d
        {init}
        for i in range(100): d.log_event("e", "C", 1, 1)
        print("enabled", d.is_enabled())
        """.format(init=f"d.initialize({prefix!r})" if how == "initialize" else "")
    env = {"DFTRACER_LOG_FILE": prefix} if how == "env" else {}
    r = run(code, env=env)
    # Still configured on: a later initialize(log_file=...) naming a good place may start it.
    assert "enabled True" in r.stdout
    lines = dftracer_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    named = f"DFTRACER_LOG_FILE={prefix}:" if how == "env" else f"initialize(log_file={prefix!r})".replace("'", '"')
    assert lines[0].startswith("[DFTRACER ERROR] " + named), lines[0]
    assert what in lines[0] and lines[0].endswith("tracing disabled"), lines[0]
    assert not r.files()
    assert not [p for p in os.listdir("/dev") if ".pfw" in p]


@pytest.mark.parametrize("how", ["env", "initialize"])
def test_a_prefix_naming_a_directory_writes_next_to_it(run, tmp_path, how):
    # A prefix is a prefix: the reference 2.2.0 writes <dir>-<hash>-app.pfw.gz beside <dir>.
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "tr").mkdir()
    code = """
        import os
        import dftracer.dftracer as d
        {init}
        for i in range(10): d.log_event("e", "C", 1, 1)
        d.finalize()
        """.format(init='d.initialize(os.environ["OUT"] + "/tr")' if how == "initialize" else "")
    r = run(code, env={"DFTRACER_LOG_FILE": str(out / "tr")})
    assert not dftracer_lines(r.stderr), r.stderr
    files = r.files()
    assert [f.parent for f in files] == [out], files
    assert files[0].name.startswith("tr-") and files[0].name.endswith("-app.pfw.gz"), files
    assert len(r.events("e")) == 10
    assert not list((out / "tr").iterdir())


@pytest.mark.parametrize("prefix", ["/dev/full", "/proc/self/trace", "{out}/file/t", "{out}/tr"])
def test_a_bad_environment_prefix_never_kills_a_later_initialize_log(run, tmp_path, prefix):
    # Functions decorated at import (where `dft_fn` starts the tracer from the environment)
    # are traced once initialize_log names a good file, whatever the environment's prefix.
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "file").write_text("a regular file")
    (out / "tr").mkdir()
    prefix = prefix.format(out=out)
    r = run(
        """
        import os
        from dftracer.python import dftracer, dft_fn
        df = dft_fn("WORK")
        @df.log
        def task(step): return step
        @dft_fn("WORK").log
        def other(step): return step
        log = dftracer.initialize_log(logfile=os.environ["OUT"] + "/good/run.pfw", data_dir=None, process_id=-1)
        for i in range(5): task(i)
        other(9)
        log.finalize()
        """,
        env={"DFTRACER_LOG_FILE": prefix},
    )
    lines = dftracer_lines(r.stderr)
    if prefix.endswith("/tr"):
        # A good prefix: the tracer started from it at import, and the late initialize_log
        # renamed the trace, which it says.
        assert len(lines) == 1 and lines[0].startswith("[DFTRACER INFO] initialize:"), r.stderr
        assert lines[0].endswith(f"applied: log file prefix {out / 'good' / 'run'}"), r.stderr
    else:
        assert len(lines) == 1 and lines[0].startswith(f"[DFTRACER ERROR] DFTRACER_LOG_FILE={prefix}:"), r.stderr
    assert [f.parent for f in r.files()] == [out / "good"], r.files()
    assert [(e["name"], e["args"]["step"]) for e in r.events()] == [("task", i) for i in range(5)] + [("other", 9)]
    assert not [p for p in os.listdir("/dev") if ".pfw" in p]


def test_missing_directories_are_created_for_env_and_initialize(run):
    r = run(
        """
        import os
        os.umask(0o022)
        import dftracer.dftracer as d
        d.log_event("e", "C", 1, 1)
        """,
        env={"DFTRACER_LOG_FILE": "traces/a/run"},   # relative: below the cwd (work/)
    )
    made = r.out.parent / "work" / "traces" / "a"
    files = list(made.glob("run-*-app.pfw.gz"))
    assert len(files) == 1, list(made.iterdir())
    assert oct((made.stat().st_mode & 0o777)) == oct(0o755)
    assert oct(((made.parent).stat().st_mode & 0o777)) == oct(0o755)
    assert not dftracer_lines(r.stderr)
    r = run(
        """
        import os
        import dftracer.dftracer as d
        d.initialize(os.environ["OUT"] + "/x/y/run.pfw")   # the native call: no Python makedirs
        d.log_event("e", "C", 1, 1)
        """
    )
    assert [f.parent.relative_to(r.out).as_posix() for f in r.files()] == ["x/y"]


def test_failed_start_is_decided_once(run, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "blocker").write_text("a regular file where a directory is needed")
    r = run(
        """
        import os
        out = os.environ["OUT"]
        from dftracer.python import dft_fn, dftracer
        import dftracer.dftracer as d
        df = dft_fn("W")                        # the first event-like call: the start fails
        @df.log
        def early(step): return step
        for i in range(1000): early(i)
        with dft_fn("W", name="ctx"): pass
        for i in range(1000): d.log_event("e", "C", 1, 1)
        # The obstacle goes away: the environment's start is not tried again.
        os.remove(out + "/blocker"); os.mkdir(out + "/blocker")
        for i in range(1000): d.log_event("e", "C", 1, 1)
        print("early is plain", type(early).__name__ == "function", "enabled", d.is_enabled())
        # A log file named by the program is a new place: it is tried, and the function
        # decorated before it is traced from then on.
        dftracer.initialize_log(logfile=out + "/named/run.pfw")
        @df.log
        def late(step): return step
        early(3)
        late(7)
        d.finalize()
        """,
        env={"DFTRACER_LOG_FILE": str(out / "blocker" / "t")},
    )
    assert "early is plain False enabled True" in r.stdout
    lines = dftracer_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    assert "blocker is not a directory" in lines[0]
    assert not list((out / "blocker").iterdir())
    assert [(e["name"], e["args"]["step"]) for e in r.events()] == [("early", 3), ("late", 7)]
    assert all(f.parent == out / "named" for f in r.files())


def test_children_inherit_the_settings_through_os_environ(run):
    r = run(
        """
        import os, subprocess, sys
        import dftracer.dftracer as d
        d.log_event("parent", "C", 1, 1)       # lazy start from the environment
        print("environ", os.environ["DFTRACER_LOG_FILE"], os.environ["DFTRACER_ENABLE"])
        d.initialize(os.environ["OUT"] + "/renamed.pfw")
        print("environ", os.environ["DFTRACER_LOG_FILE"])
        # A child given a copy of os.environ (not the C environment) still traces there.
        code = "import dftracer.dftracer as d; d.log_event('child', 'C', 1, 1)"
        subprocess.run([sys.executable, "-c", code], env=dict(os.environ), check=True)
        """,
        env={"DFTRACER_DATA_DIR": "/data"},
    )
    out = str(r.out)
    assert f"environ {out}/trace 1" in r.stdout
    assert f"environ {out}/renamed" in r.stdout
    names = sorted(f.name.split("-")[0] for f in r.files())
    assert names == ["renamed", "renamed"], names
    # The parent's subprocess.run is recorded too (its process calls: FORMAT.md "Process calls").
    assert {e["name"] for e in r.events() if e["cat"] != "POSIX"} == {"parent", "child"}
    assert all(e["dur"] == 0 for e in r.events() if e["cat"] == "POSIX")
