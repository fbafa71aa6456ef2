"""Decorators record what was passed, on every kind of callable (issue: Python frontend)."""


def test_passed_args_not_defaults_and_no_leak(run):
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        df = dft_fn("C")
        @df.log
        def work(x, epoch=1, step=2): return x
        @df.log
        def other(y): return y
        work(0, epoch=5, step=9)
        work(1)
        work(2, 7, 8)
        other(3)
        log.finalize()
        """
    )
    ev = r.events()
    assert [e["name"] for e in ev] == ["work", "work", "work", "other"]
    strip = lambda a: {k: v for k, v in a.items() if k != "hhash"}
    assert strip(ev[0]["args"]) == {"epoch": 5, "step": 9}
    assert strip(ev[1]["args"]) == {}, "defaults are not recorded as if passed"
    assert strip(ev[2]["args"]) == {"epoch": 7, "step": 8}
    assert strip(ev[3]["args"]) == {}, "no args leak between functions"
    assert all(e["cat"] == "C" and e["type"] == 6 for e in ev)


def test_every_kind_of_callable(run):
    r = run(
        """
        import asyncio
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("K")
        class C:
            @df.log_init
            def __init__(self, step): self.step = step; self.v = 10
            @df.log
            def method(self, epoch): return epoch + self.v
            @df.log
            @staticmethod
            def s_above(a): return a
            @staticmethod
            @df.log
            def s_below(a): return a
            @df.log
            @classmethod
            def c_above(cls, a): return (cls.__name__, a)
            @classmethod
            @df.log
            def c_below(cls, a): return (cls.__name__, a)
            @df.log
            @property
            def p_above(self): return self.v
            @property
            @df.log
            def p_below(self): return self.v + 1
            @df.log_static
            def st(a): return a
        c = C(step=4)
        assert c.method(2) == 12
        assert C.s_above(1) == 1 and c.s_below(2) == 2
        assert C.c_above(3) == ("C", 3) and c.c_below(4) == ("C", 4)
        assert c.p_above == 10 and c.p_below == 11
        @df.log
        def gen(n):
            for i in range(n): yield i
        assert list(gen(3)) == [0, 1, 2]
        @df.log
        async def coro(x):
            await asyncio.sleep(0)
            return x * 2
        assert asyncio.run(coro(21)) == 42
        @df.log
        def boom(): raise ValueError("x")
        try:
            boom()
        except ValueError:
            pass
        else:
            raise SystemExit("exception swallowed")
        assert c.method.__name__ == "method" and c.method.__wrapped__ is not None
        log.finalize()
        """
    )
    names = [e["name"] for e in r.events()]
    for expected in [
        "C.__init__", "C.method", "C.s_above", "C.s_below", "C.c_above", "C.c_below",
        "C.p_above", "C.p_below", "gen", "coro", "boom",
    ]:
        assert names.count(expected) == 1, (expected, names)
    m = r.events("C.method")[0]["args"]
    assert m["epoch"] == 2 and m["step"] == 4, "passed arg plus self attribute"


def test_callables_without_a_python_function_behind_them(run):
    """A decorated call forwards the caller's arguments through the callable's own vectorcall
    slot when it has one, else through PyObject_Vectorcall: builtins, partials, classes,
    instances with __call__ and bound methods all get their arguments and return or raise as
    undecorated, and each call is one event."""
    r = run(
        """
        import functools
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("K")
        class Point:
            def __init__(self, x, *, y=0): self.x, self.y = x, y
        class Adder:
            def __call__(self, a, b=1): return a + b
        def add3(a, b, c=0): return a + b + c
        cases = [
            (df.log(len), ([1, 2, 3],), {}, 3),
            (df.log(sorted), ([3, 1, 2],), {"reverse": True}, [3, 2, 1]),
            (df.log(functools.partial(add3, 1)), (2,), {"c": 3}, 6),
            (df.log(Adder()), (5,), {"b": 7}, 12),
            (df.log("a-b".split), ("-",), {}, ["a", "b"]),
            (df.log(dict), (), {"k": 1}, {"k": 1}),
        ]
        for f, a, k, want in cases:
            for _ in range(3):
                assert f(*a, **k) == want, (f, a, k)
        p = df.log(Point)(4, y=5)
        assert (p.x, p.y) == (4, 5)
        for f, a in ((df.log(len), (5,)), (df.log(Adder()), ()), (df.log(Point), (1, 2))):
            try:
                f(*a)
            except TypeError:
                pass
            else:
                raise SystemExit(f"no TypeError from {f}{a}")
        log.finalize()
        """
    )
    names = [e["name"] for e in r.events() if e["cat"] == "K"]
    assert len(names) == 6 * 3 + 1 + 3, names


def test_captured_ints_and_every_other_value_give_the_same_lines(run):
    """Calls whose captured values (epoch, step, image_idx, image_size) are all ints or None
    are recorded from a keyed schema (integers in the ring, the line from a template); any
    other value takes the general path. Both write the same line: keys in the function's
    parameter order, ints as JSON numbers, absent and None values left out."""
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("K")
        @df.log
        def es(x, epoch, step=None): return x
        @df.log
        def se(step, epoch, image_idx=None): return step
        for i in range(3):
            es(0, i, 10 * i)
            es(0, epoch=i, step=-5)
            es(0, i)
            es(0, i, step=None)
            se(i, 7)
            se(step=i, epoch=8, image_idx=2 ** 62)
        es(0, 2 ** 64, 1)                # too large for 64 bits signed: general path
        es(0, 1.5, 1)                    # a float: general path
        es(0, True, 1)                   # a bool is not an int here: general path
        se("s", 1)                       # a str: general path
        log.finalize()
        """
    )
    import gzip
    lines = [l for f in r.files() for l in gzip.open(f, "rt").read().splitlines() if '"cat":"K"' in l]
    args = [l[l.index('"args":'):] for l in lines]
    hh = args[0][len('"args":{"hhash":"'):][:16]
    def a(body):
        return '"args":{"hhash":"%s"%s}}' % (hh, body)
    want = []
    for i in range(3):
        want += [a(',"epoch":%d,"step":%d' % (i, 10 * i)), a(',"epoch":%d,"step":-5' % i),
                 a(',"epoch":%d' % i), a(',"epoch":%d' % i),
                 a(',"step":%d,"epoch":7' % i), a(',"step":%d,"epoch":8,"image_idx":%d' % (i, 2 ** 62))]
    # (Past 64 bits the general path writes the number as a string.)
    want += [a(',"epoch":"%d","step":1' % 2 ** 64), a(',"epoch":1.5,"step":1'),
             a(',"epoch":true,"step":1'), a(',"step":"s","epoch":1')]
    assert args == want, "\n".join(f"{x}\n{y}\n" for x, y in zip(args, want) if x != y)


def test_dft_fn_blocks_with_int_values_write_the_general_lines(run):
    """`with dft_fn(cat, name=..., step=i, epoch=e)` with int (or None) values is recorded
    from a keyed schema; other values, and keys set by update() beyond the four captured
    ones, take the general path. The lines are the same: captured keys in the order epoch,
    step, image_idx, image_size, then the others."""
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        for i in range(2):
            with dft_fn("K", name="b", step=i, epoch=3):
                pass
            with dft_fn("K", name="b", image_size=-i, step=None):
                pass
            with dft_fn("K", name="b", step=2 ** 63) as d:
                pass
            with dft_fn("K", name="b", step=i) as d:
                d.update(epoch=1.5)
            with dft_fn("K", name="b", step=i) as d:
                d.update(args={"lr": 2})
        log.finalize()
        """
    )
    import gzip
    lines = [l for f in r.files() for l in gzip.open(f, "rt").read().splitlines() if '"cat":"K"' in l]
    args = [l[l.index('"args":'):] for l in lines]
    hh = args[0][len('"args":{"hhash":"'):][:16]
    a = lambda body: '"args":{"hhash":"%s"%s}}' % (hh, body)
    want = []
    for i in range(2):
        want += [a(',"epoch":3,"step":%d' % i), a(',"image_size":%d' % -i),
                 a(',"step":%d' % 2 ** 63), a(',"epoch":1.5,"step":%d' % i),
                 a(',"step":%d,"lr":2' % i)]
    assert args == want, "\n".join(f"{x}\n{y}\n" for x, y in zip(args, want) if x != y)


def test_decorated_function_pickles(run):
    r = run(
        """
        import pickle
        from dftracer.python import dftracer, dft_fn
        df = dft_fn("P")
        @df.log
        def f(x): return x + 1
        g = pickle.loads(pickle.dumps(f))
        assert g is f and g(1) == 2
        """
    )
    assert len(r.events("f")) == 1


def test_context_manager_iter_update_and_name_default(run):
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        def loader():
            with dft_fn("io") as d:
                d.update(epoch=3, args={"path": "/x", "ratio": 0.5})
        loader()
        with dft_fn("io", name="read_loop", step=2):
            pass
        for i in dft_fn("loop").iter(range(3), name="fetch"):
            pass
        m = dft_fn("meta", name="m")
        m.log_metadata("model", "resnet")
        log.finalize()
        """
    )
    ev = {e["name"]: e for e in r.events()}
    assert ev["loader"]["args"]["epoch"] == 3
    assert ev["loader"]["args"]["path"] == "/x" and ev["loader"]["args"]["ratio"] == 0.5
    assert ev["read_loop"]["args"]["step"] == 2
    assert len(r.events("fetch.iter")) == 3 and len(r.events("fetch.yield")) == 3
    assert [e["args"]["step"] for e in r.events("fetch.iter")] == [1, 2, 3]
    cm = [x for x in r.records() if x["name"] == "CM" and x["args"]["name"] == "model"]
    assert cm and cm[0]["args"]["value"] == "resnet" and cm[0]["type"] == 6


def test_dft_fn_is_a_native_class_users_can_subclass(run):
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        class Timed(dft_fn):                    # own __init__ calling the base's
            def __init__(self, cat, extra):
                super().__init__(cat, name="timed", step=extra)
                self.extra = extra
        class Plain(dft_fn):                    # no __init__: the base's
            pass
        with Timed("C", 5) as t:
            assert t.update(epoch=2, args={"k": "v"}) is t, "update() returns self, as pydftracer's"
        assert isinstance(t, dft_fn) and t.extra == 5
        with Plain("C", name="plain", epoch=1):
            pass
        d = dft_fn("C", "positional", 1, 2, 3, 4.0, True)
        assert (d.name, d.cat, d._args) == ("positional", "C", {"epoch": 1, "step": 2, "image_idx": 3, "image_size": 4.0})
        assert d.reset() is d and d.flush() is d and d.relate(1, 2) is d and d.uses("t", 1) == 0
        import inspect
        assert dft_fn.__module__ == "dftracer.python"
        # pydftracer's parameter names: log_init(init=None, name=None), log_static(func=None, name=None)
        assert list(inspect.signature(dft_fn.log_init).parameters) == ["self", "init", "name"]
        assert list(inspect.signature(dft_fn.log_static).parameters) == ["self", "func", "name"]
        assert list(inspect.signature(dft_fn).parameters) == ["cat", "name", "epoch", "step", "image_idx", "image_size", "enable"]
        for bad, msg in [(lambda: dft_fn(), "cat"), (lambda: dft_fn(1), "cat"), (lambda: dft_fn("C", name=3), "name"),
                         (lambda: dft_fn("C", "n", name="m"), "multiple values")]:
            try:
                bad()
                raise AssertionError(msg)
            except TypeError as e:
                assert msg in str(e), e
        with dft_fn("C", name="off", enable=False):
            pass
        log.finalize()
        """
    )
    ev = {e["name"]: e for e in r.events()}
    strip = lambda a: {k: v for k, v in a.items() if k != "hhash"}
    assert strip(ev["timed"]["args"]) == {"epoch": 2, "step": 5, "k": "v"}
    assert strip(ev["plain"]["args"]) == {"epoch": 1}
    assert "positional" in ev and "off" not in ev


def test_parameters_from_the_code_object_match_inspect_signature():
    import functools

    from dftracer.python import _parameters, _parameters_by_signature

    def a(x, y, /, z, *args, k, step=1, **kw): pass
    def b(): pass
    def c(self, epoch, *, step): pass
    def d(*step): pass
    def e(**epoch): x = 1; return x  # noqa: E702
    def g(a, *rest): y = a; return y  # noqa: E702

    @functools.wraps(c)
    def wrapped(*a, **k): pass

    class K:
        def m(self, image_idx): pass

    for fn in (a, b, c, d, e, g, wrapped, K.m, K().m, functools.partial(a, 1), print, len):
        assert _parameters(fn) == _parameters_by_signature(fn), fn
    assert _parameters(a) == [("x", 0), ("y", 1), ("z", 2), ("args", None), ("k", None), ("step", None), ("kw", None)]


def test_names_and_categories_of_every_kind_and_more_than_the_core_interns(run):
    """A decorated call without args is recorded from the core's schema of its name and
    category (dftracer_core::intern, a fixed table): names that need escaping, long ones and
    names past the table's 4,096 entries are recorded with their strings instead. Every kind
    gives the same line, byte for byte in its shape, from two threads at once."""
    r = run(
        r"""
        import threading
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        odd = ['q"uote', 'back\\slash', 'caf\u00e9', 'tab\there', 'x' * 300, 'e\U0001F600']
        names = odd + [f"fn_{i}" for i in range(5000)]
        funcs = []
        for i, n in enumerate(names):
            def f(): return 1
            f.__name__ = f.__qualname__ = n
            funcs.append(dft_fn("cat_" + str(i % 3) if i % 7 else 'c"at').log(f))
        def go():
            for f in funcs:
                f()
        ts = [threading.Thread(target=go) for _ in range(2)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        log.finalize()
        """,
        timeout=180,
    )
    files = r.files()
    assert len(files) == 1
    import gzip, json, re
    lines = [l for l in gzip.open(files[0], "rt", encoding="utf-8").read().splitlines() if '"ph":1' in l]
    ev = [json.loads(l) for l in lines]
    ev_lines = [(e, l) for e, l in zip(ev, lines) if e["cat"] != "dftracer"]
    names = ['q"uote', 'back\\slash', 'caf\u00e9', 'tab\there', 'x' * 300, 'e\U0001F600'] + [
        f"fn_{i}" for i in range(5000)
    ]
    from collections import Counter
    got = Counter((e["name"], e["cat"]) for e, _ in ev_lines)
    want = Counter()
    for i, n in enumerate(names):
        want[(n, "cat_" + str(i % 3) if i % 7 else 'c"at')] += 2
    assert got == want
    shape = re.compile(
        r'^\{"id":\d+,"name":"(?:[^"\\]|\\.)*","cat":"(?:[^"\\]|\\.)*","type":6,"pid":\d+,"tid":\d+,'
        r'"ts":\d+,"dur":\d+,"ph":1,"args":\{"hhash":"[0-9a-f]{16}"\}\}$'
    )
    for e, l in ev_lines:
        assert shape.match(l), l
        assert e["args"].keys() == {"hhash"}
    # Both threads' events, ids unique and in file order.
    assert len({e["tid"] for e, _ in ev_lines}) == 2
    ids = [e["id"] for e in ev]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_dft_fn_enter_exit_common_and_general_values(run):
    """__enter__/__exit__ are native method descriptors: exceptions pass through, an explicit
    flush() is not recorded twice, subclasses call them through super(); values the fast
    record does not take (an int over 64 bits, a lone surrogate, a str subclass) are written
    by the general conversion."""
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        class S(str): pass
        class Sub(dft_fn):
            def __enter__(self):
                super().__enter__()
                return self.update(args={"sub": 1})
            def __exit__(self, *exc):
                return super().__exit__(*exc)
        with Sub("C", name="sub"):
            pass
        try:
            with dft_fn("C", name="raises", step=3):
                raise KeyError("k")
        except KeyError:
            print("propagated")
        f = dft_fn("C", name="flushed")
        with f:
            f.flush()
        assert f.__exit__() is False and f.__exit__(None, None, None) is False
        with dft_fn("C", name="big", step=2**70, epoch=1.5) as d:
            d.update(args={"s": S("v"), "t": True})
        with dft_fn("C", name="bad\\udcff"):
            pass
        log.finalize()
        """
    )
    assert "propagated" in r.stdout
    ev = {e["name"]: e for e in r.events()}
    strip = lambda a: {k: v for k, v in a.items() if k != "hhash"}
    assert strip(ev["sub"]["args"]) == {"sub": 1}
    assert strip(ev["raises"]["args"]) == {"step": 3}
    assert len(r.events("flushed")) == 1
    assert strip(ev["big"]["args"]) == {"epoch": 1.5, "step": str(2**70), "s": "v", "t": True}
    assert "bad\ufffd" in ev, list(ev)


def test_interned_events_aggregate_like_the_others(run):
    """With aggregation on, decorated calls and inline dft_fn regions without args (recorded
    from the core's interned schemas) land in their ph 3 buckets, every call counted."""
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        df = dft_fn("C")
        @df.log
        def work(): return 1
        for _ in range(1000): work()
        for _ in range(500):
            with dft_fn("C", name="ctx"): pass
        log.finalize()
        """,
        env={"DFTRACER_ENABLE_AGGREGATION": "1"},
    )
    agg = [x for x in r.records() if x.get("ph") == 3 and x["cat"] == "C"]
    counts = {}
    for x in agg:
        assert x["type"] == 6 and x["args"]["hhash"]
        counts[x["name"]] = counts.get(x["name"], 0) + x["args"]["dft_cnt"]
    assert counts == {"work": 1000, "ctx": 500}
    assert not [x for x in r.records() if x.get("ph") == 1 and x["cat"] == "C"]
