"""The native log_event and friends: values as given, clear errors, no silent loss."""

import pytest


def test_tuples_bare_values_and_64_bit_ints(run):
    r = run(
        """
        import dftracer.dftracer as d
        d.initialize()
        t = d.get_time()
        d.log_event("a", "C", t, 10, {"i": (0, 5), "big": 2**40, "neg": -(2**62), "u": 2**64 - 1},
                    {"s": (0, "he\\"llo\\n"), "bare": "x"}, {"f": (0, 123456789.123), "g": 0.1})
        d.log_event(name="b", cat="C", start_time=1, duration=2, int_args={"tid": 5, "hhash": 1})
        d.finalize()
        """
    )
    a, b = r.events("a")[0], r.events("b")[0]
    assert a["args"]["i"] == 5 and a["args"]["big"] == 2**40 and a["args"]["neg"] == -(2**62)
    assert a["args"]["u"] == 2**64 - 1
    assert a["args"]["s"] == 'he"llo\n' and a["args"]["bare"] == "x"
    assert a["args"]["f"] == 123456789.123 and a["args"]["g"] == 0.1, "full precision floats"
    assert (b["ts"], b["dur"]) == (1, 2), "simulated-clock timestamps written as given"
    assert b["args"]["tid"] == 5 and b["args"]["user_hhash"] == 1 and len(b["args"]["hhash"]) == 16


BAD = [
    ('d.log_event(1, "C", 1, 1)', TypeError, "name"),
    ('d.log_event("n", None, 1, 1)', TypeError, "cat"),
    ('d.log_event("n", "C", -1, 1)', ValueError, "start_time"),
    ('d.log_event("n", "C", 1, 1.5)', TypeError, "duration"),
    ('d.log_event("n", "C", 1, 1, {"a": "s"})', TypeError, "int_args"),
    ('d.log_event("n", "C", 1, 1, {"a": 2**70})', ValueError, "int_args"),
    ('d.log_event("n", "C", 1, 1, {}, {"a": 3})', TypeError, "string_args"),
    ('d.log_event("n", "C", 1, 1, {}, {}, {"a": "x"})', TypeError, "float_args"),
    ('d.log_event("n", "C", 1, 1, {1: 2})', TypeError, "int_args"),
    ('d.log_event("n", "C", 1, 1, [1, 2])', TypeError, "int_args"),
    ('d.log_event("n", "C", 1, 1, {"a": (0, 1, 2)})', TypeError, "int_args"),
    ('d.log_event("n", "C", 1, 1, {"a": 1.5})', TypeError, "int_args"),
    ('d.log_event("n", "C", 1, 1, {"a": (0, "1")})', TypeError, "int_args"),
    ('d.log_event("n", "C", 1, 1, {}, {"s": (0, 3)})', TypeError, "string_args"),
    ('d.log_event("n", "C", 1, 1, {}, {1: "x"})', TypeError, "string_args"),
    ('d.log_event("n", "C", 1, 1, {}, "s=x")', TypeError, "string_args"),
    ('d.log_event("n", "C", 1, 1, None, None, {"f": (0, "x")})', TypeError, "float_args"),
    ('d.log_event("n", "C", 1, 1, string_args={"s": None})', TypeError, "string_args"),
    # pydftracer's method (float_args before string_args), keywords as users write them
    ('log.log_event("n", "C", 1, 1, int_args={"a": "x"})', TypeError, "int_args"),
    ('log.log_event("n", "C", 1, 1, string_args={"s": (0, 3)})', TypeError, "string_args"),
    ('log.log_event("n", "C", 1, 1, float_args={"f": "x"})', TypeError, "float_args"),
    ('log.log_event("n", "C", 2**64, 1)', ValueError, "start_time"),
]


@pytest.mark.parametrize("call,exc,word", BAD)
def test_bad_input_names_the_argument(run, call, exc, word):
    r = run(
        f"""
        import dftracer.dftracer as d
        from dftracer.python import dftracer
        log = dftracer.initialize_log()
        try:
            {call}
        except {exc.__name__} as e:
            print("ERR", e)
        else:
            print("NO ERROR")
        d.log_event("ok", "C", 1, 1)
        d.finalize()
        """
    )
    assert "ERR" in r.stdout and word in r.stdout, r.stdout
    assert len(r.events("ok")) == 1 and len(r.events("n")) == 0


def test_events_before_initialize_are_kept_and_path_still_wins(run):
    r = run(
        """
        import os
        from dftracer.python import dftracer
        import dftracer.dftracer as d
        d.log_event("early", "C", 1, 1)
        dftracer.initialize_log(logfile=os.environ["OUT"] + "/given/run.pfw")
        d.log_event("late", "C", 2, 1)
        dftracer.get_instance().finalize()
        """
    )
    files = r.files()
    assert len(files) == 1 and files[0].parent.name == "given" and files[0].name.startswith("run-"), files
    assert len(r.events("early")) == 1 and len(r.events("late")) == 1


def test_metadata_app_used_and_get_config(run):
    r = run(
        """
        from dftracer.python import dftracer
        import dftracer.dftracer as d
        log = dftracer.initialize_log()
        log.log_metadata_event("k", "v")
        log.set_app_metadata_int("batch", 32)
        log.set_app_metadata_string("model", "resnet")
        log.mark_used("ai")
        assert d.get_config("ENABLE") == "1"
        assert d.get_config("TIME_METRIC") == "US"
        assert d.get_config("NOPE") == ""
        d.log_event("e", "C", 1, 1)
        log.finalize()
        """
    )
    end = [x for x in r.records() if x["name"] == "end"][0]["args"]
    assert end["app"] == {"batch": 32, "model": "resnet"}
    assert end["used"]["ai"] == 1 and end["used"]["python_function"] == 1 and end["used"]["PYTHON"] == 1
    assert any(x["name"] == "CM" and x["args"]["name"] == "k" for x in r.records())


def test_get_time_is_zero_when_off_and_nothing_is_written(run):
    r = run(
        """
        import dftracer.dftracer as d
        from dftracer.python import dftracer, dft_fn
        assert d.get_time() == 0
        df = dft_fn("C")
        def f(): return 1
        assert df.log(f) is f, "decorator returns the function itself when off"
        with dft_fn("C", name="x"):
            pass
        dftracer.initialize_log()
        d.log_event("e", "C", 1, 1)
        """,
        enable=False,
    )
    assert r.files() == []


@pytest.mark.parametrize("metric,digits", [("NS", 19), ("US", 16), ("MS", 13), ("SEC", 10)])
def test_time_metric(run, metric, digits):
    r = run(
        """
        from dftracer.python import dft_fn
        with dft_fn("C", name="x"):
            pass
        """,
        env={"DFTRACER_TIME_METRIC": metric},
    )
    assert len(str(r.events("x")[0]["ts"])) == digits
    cm = [x for x in r.records() if x["name"] == "CM" and x["args"]["name"] == "time_metric"]
    assert cm[0]["args"]["value"] == metric



@pytest.mark.parametrize(
    "env,args,app",
    [
        # PMI_RANK (Hydra) wins over SLURM_PROCID (the batch step's, under mpirun in a job).
        ({"PMI_RANK": "3", "SLURM_PROCID": "0"}, [], {"rank": 3}),
        ({"PMI_RANK": "3", "SLURM_PROCID": "0"}, ["7"], {"rank": 7}),  # the program's own wins
        ({}, [], {}),
    ],
)
def test_the_launchers_rank_is_app_metadata(run, env, args, app):
    r = run(
        """
        import sys
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        with dft_fn("t", name="x"):
            pass
        if len(sys.argv) > 1:
            log.set_app_metadata_int("rank", int(sys.argv[1]))
        log.finalize()
        """,
        env=env,
        args=args,
    )
    assert [x for x in r.records() if x["name"] == "end"][0]["args"]["app"] == app


def test_mark_used_before_initialize_is_kept(run):
    # pydftracer's dynamo module makes its `dynamo` object (and marks it used) at import,
    # before the script calls initialize_log: the mark must reach the end record.
    r = run(
        """
import dftracer.dftracer as native
native.mark_used("early_integration")
from dftracer.python import dftracer, dft_fn
log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
native.mark_used("late_integration")
with dft_fn("X", name="one"):
    pass
log.finalize()
"""
    )
    end = [x for x in r.records() if x["name"] == "end"][0]["args"]
    assert end["used"]["early_integration"] == 1 and end["used"]["late_integration"] == 1, end["used"]


def test_log_event_arguments_by_keyword_and_position(run):
    r = run(
        """
        import dftracer.dftracer as d
        from dftracer.python import dftracer
        log = dftracer.initialize_log()
        d.log_event(name="kw", cat="C", start_time=1, duration=2, string_args={"s": (0, "v")})
        log.log_event("m", "C", 3, 4, {"i": (0, 5)}, {"f": 0.5}, {"s": "x"}, None)  # pydftracer's order
        for call, msg in [(lambda: d.log_event("a"), "missing required argument 'cat'"),
                          (lambda: d.log_event("a", "C", 1, 2, bogus=1), "unexpected keyword argument 'bogus'"),
                          (lambda: d.log_event("a", "C", 1, 2, None, name="b"), "multiple values"),
                          (lambda: log.log_event("a", "C", 1, 2, {}, {}, {}, None, 9), "at most 8")]:
            try:
                call()
                raise AssertionError(msg)
            except TypeError as e:
                assert msg in str(e), e
        log.finalize()
        """
    )
    kw, m = r.events("kw")[0], r.events("m")[0]
    assert kw["args"]["s"] == "v" and (kw["ts"], kw["dur"]) == (1, 2)
    assert (m["args"]["i"], m["args"]["f"], m["args"]["s"]) == (5, 0.5, "x")


def test_common_and_unusual_argument_types_write_the_same(run):
    """Exact str/int/float/dict/tuple arguments take the native fast path; subclasses, other
    mappings, bools, ints given as floats and u64 values take the general one: same trace."""
    r = run(
        """
        import collections, enum
        import dftracer.dftracer as d
        from dftracer.python import dftracer
        log = dftracer.initialize_log()
        class S(str): pass
        class I(enum.IntEnum):
            SEVEN = 7
        class M(collections.abc.Mapping):
            def __init__(self, d): self.d = d
            def __getitem__(self, k): return self.d[k]
            def __iter__(self): return iter(self.d)
            def __len__(self): return len(self.d)
        P = collections.namedtuple("P", "tag value")
        log.log_event("fast", "C", 5, 6, int_args={"i": (0, 7), "b": True, "n": -3},
                      string_args={"s": (0, "v"), "u": "\u00e9"}, float_args={"f": 2.0})
        log.log_event(S("slow"), S("C"), I.SEVEN - 2, 6, int_args=M({"i": P(0, I.SEVEN), "b": True, "n": -3}),
                      string_args={S("s"): (0, S("v")), "u": "\u00e9"}, float_args={"f": 2})
        d.log_event("big", "C", 2**64 - 1, 0, {"u": 2**64 - 1, "step": 1}, {"step": "x"})
        log.finalize()
        """
    )
    fast, slow, big = r.events("fast")[0], r.events("slow")[0], r.events("big")[0]
    for k in ("i", "b", "n", "s", "u", "f"):
        assert fast["args"][k] == slow["args"][k], (k, fast["args"], slow["args"])
        assert type(fast["args"][k]) is type(slow["args"][k]), k
    assert fast["args"]["b"] is True and fast["args"]["f"] == 2.0 and fast["args"]["u"] == "\u00e9"
    assert (fast["ts"], fast["dur"]) == (slow["ts"], slow["dur"]) == (5, 6)
    assert big["ts"] == 2**64 - 1 and big["args"]["u"] == 2**64 - 1
    assert big["args"]["step_int"] == 1 and big["args"]["step"] == "x", "a key in two dicts: both kept"


def test_schema_route_writes_what_the_arguments_say(run):
    """log_event's args go through schemas found by the identity of the call's str objects
    (a per-thread cache holding references): keys built at run time (new objects of equal
    text, freed and their memory reused with other text), more shapes than the cache holds,
    the same keys with values of another kind, and more keys than an entry holds all write
    exactly their own names and values; and a key evicted from the cache is not kept alive."""
    r = run(
        """
        import sys, threading
        from dftracer.python import dftracer
        log = dftracer.initialize_log()
        for i in range(3000):
            k = "".join(["k", str(i % 700)])  # a new object every call; equal text every 700
            log.log_event("dyn", "C", i, 1, int_args={k: i}, string_args={"s": f"v{i}"})
        for i in range(300):
            log.log_event("kinds", "C", i, 1, int_args={"x": i} if i % 3 else {},
                          string_args={"x": "str"} if i % 3 == 0 else {},
                          float_args={"f": i / 2} if i % 2 else {})
        for i in range(50):
            log.log_event("wide", "C", i, 1, int_args={f"w{j}": i + j for j in range(12)},
                          string_args={"tail": "t" * (i % 3)})
        own = [[f"k{n}_{j}" for j in range(80)] for n in range(4)]
        def worker(n):
            for i in range(200):
                log.log_event("thr", "C", i, n, int_args={"n": n, "i": i}, string_args={"t": str(n)})
                # Shapes of each thread's own, more than a cache holds, while the other
                # threads do the same.
                log.log_event("thr2", "C", i, n, int_args={own[n][i % 80]: i})
        ts = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        probe = "".join(["pro", "be"])
        before = sys.getrefcount(probe)
        log.log_event("probe", "C", 0, 1, int_args={probe: 1})
        held = sys.getrefcount(probe) - before
        # Evicts the probe's entry (64 entries a thread): keys kept alive, so that their
        # addresses (which pick the entries) are all different.
        keys = [f"e{i}" for i in range(5000)]
        for i, k in enumerate(keys):
            log.log_event("evict", "C", i, 1, int_args={k: i})
        print(held, sys.getrefcount(probe) - before)
        log.finalize()
        """
    )
    dyn = r.events("dyn")
    assert len(dyn) == 3000
    for e in dyn:
        i = e["ts"]
        assert {k: v for k, v in e["args"].items() if k != "hhash"} == {f"k{i % 700}": i, "s": f"v{i}"}, e
    for e in r.events("kinds"):
        i, a = e["ts"], e["args"]
        want = {"x": i} if i % 3 else {"x": "str"}
        if i % 2:
            want["f"] = i / 2
        assert {k: v for k, v in a.items() if k != "hhash"} == want, e
        assert type(a["x"]) is type(want["x"])
    for e in r.events("wide"):
        i = e["ts"]
        assert [k for k in e["args"] if k != "hhash"] == [f"w{j}" for j in range(12)] + ["tail"]
        assert all(e["args"][f"w{j}"] == i + j for j in range(12)) and e["args"]["tail"] == "t" * (i % 3)
    thr = r.events("thr")
    assert sorted((e["dur"], e["ts"]) for e in thr) == [(n, i) for n in range(4) for i in range(200)]
    assert all(e["args"]["n"] == e["dur"] and e["args"]["t"] == str(e["dur"]) for e in thr)
    thr2 = r.events("thr2")
    assert sorted((e["dur"], e["ts"]) for e in thr2) == [(n, i) for n in range(4) for i in range(200)]
    for e in thr2:
        n, i = e["dur"], e["ts"]
        assert {k: v for k, v in e["args"].items() if k != "hhash"} == {f"k{n}_{i % 80}": i}, e
    assert len(r.events("probe")) == 1 and r.events("probe")[0]["args"]["probe"] == 1
    held, after = map(int, r.stdout.split())
    assert held == 1, "the cache holds one reference to a key it saw"
    assert after == 0, "and drops it when the entry is replaced"


def test_ints_of_every_size_write_their_values(run):
    """Ints of at most two 30-bit digits are read in place (a CPython layout, checked at
    import: `_int_layout` names it where it must be in use); larger ones through CPython's
    own conversion: the trace holds every value as given, at each digit boundary, signed,
    as start times, durations, bare values and (tag, value) pairs."""
    r = run(
        """
        import random, sys
        import dftracer.dftracer as d
        from dftracer.python import dftracer
        log = dftracer.initialize_log()
        edges = [0, 1, 5, 255, 256, 257, 2**30 - 1, 2**30, 2**30 + 1, 2**31, 2**32 + 7, 2**59,
                 2**60 - 1, 2**60, 2**60 + 1, 2**62, 2**63 - 1, 1_700_000_000_000_000]
        rnd = random.Random(7)
        values = edges + [-v for v in edges] + [-(2**63)] + [rnd.randrange(-(2**63), 2**63) for _ in range(300)]
        for i, v in enumerate(values):
            log.log_event("v", "C", i, 1, int_args={"bare": v, "pair": (0, v)}, string_args={"s": "x"})
            d.log_event("w", "C", i, 2, {"only": v})
            if v >= 0:
                log.log_event("t", "C", v, v, int_args={"i": i})
        for v in [2**63, 2**64 - 1]:
            log.log_event("u", "C", v, 1, int_args={"u": v})
        for v in [-(2**63) - 1, 2**64, -(2**64), 10**30]:
            try:
                log.log_event("over", "C", 1, 1, int_args={"o": v})
                raise AssertionError(v)
            except ValueError:
                pass
        log.finalize()
        print(repr(values))
        info = sys.int_info
        digits30 = (info.bits_per_digit, info.sizeof_digit) == (30, 4)
        want = "" if not digits30 else "sized" if sys.version_info < (3, 12) else "tagged"
        print(repr((d._int_layout(), want)))
        """
    )
    out = r.stdout.splitlines()
    values = eval(out[0])
    layout, want = eval(out[1])
    assert layout == want, "small ints are read in place on this CPython"
    v, w = r.events("v"), r.events("w")
    assert len(v) == len(w) == len(values)
    for e in v:
        want_v = values[e["ts"]]
        assert (e["args"]["bare"], e["args"]["pair"], e["args"]["s"]) == (want_v, want_v, "x"), e
    for e in w:
        assert e["args"]["only"] == values[e["ts"]], e
    t = r.events("t")
    assert len(t) == sum(1 for x in values if x >= 0)
    for e in t:
        assert e["ts"] == e["dur"] == values[e["args"]["i"]], e
    assert sorted((e["ts"], e["args"]["u"]) for e in r.events("u")) == [(2**63, 2**63), (2**64 - 1, 2**64 - 1)]
    assert not r.events("over")


def test_keys_in_two_dicts_and_lone_surrogates_are_never_cached(run):
    """A call's schema is found by the identity of its str objects, without reading their
    text; a shape whose keys repeat across dicts (the general path renames one) or whose
    name or keys hold lone surrogates (it replaces them) never gets an entry, however
    often it comes, so every such call keeps going to the general path."""
    r = run(
        """
        from dftracer.python import dftracer
        log = dftracer.initialize_log()
        step = "".join(["st", "ep"])  # another object of the same text as the literal
        for i in range(5):
            log.log_event("dup", "C", i, 1, int_args={"step": i}, string_args={"step": "x"})
            log.log_event("dup2", "C", i, 1, int_args={step: i}, string_args={"step": "x"})
            log.log_event("dup3", "C", i, 1, int_args={"a": i}, string_args={"b": "y"},
                          float_args={"a": 0.5})
            log.log_event("sur", "C", i, 1, int_args={"k\\ud800": i})
            log.log_event("n\\ud800", "C", i, 1, int_args={"k": i})
        log.finalize()
        """
    )
    for name in ("dup", "dup2"):
        es = r.events(name)
        assert sorted(e["ts"] for e in es) == list(range(5))
        for e in es:
            assert (e["args"]["step_int"], e["args"]["step"]) == (e["ts"], "x"), e
    d3 = r.events("dup3")
    assert len(d3) == 5 and all(e["args"]["a_int"] == e["ts"] and e["args"]["a"] == 0.5 for e in d3), d3
    sur = r.events("sur")
    assert len(sur) == 5 and all(e["args"]["k\ufffd"] == e["ts"] for e in sur), sur
    named = r.events("n\ufffd")
    assert len(named) == 5 and all(e["args"]["k"] == e["ts"] for e in named), named
