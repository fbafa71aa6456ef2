"""`dft_fn.update()` made during a decorated call of that dft_fn lands on the call's event
(and on the events of the calls of that dft_fn in progress around it, on the same thread),
never on later calls' events. Real programs, real trace files."""


def _args(e):
    return {k: v for k, v in e["args"].items() if k != "hhash"}


def test_dlio_npz_reader_image_size_on_each_get_sample(run):
    """DLIO's NPZ reader: `dlp.update(image_size=image.nbytes)` inside `get_sample`."""
    r = run(
        """
        import numpy as np
        from dftracer.python import dftracer, dft_fn as Profile
        log = dftracer.initialize_log()
        dlp = Profile("reader")

        class FormatReader:
            @dlp.log
            def read_index(self, image_idx, step):
                filename, sample_index = self.index[image_idx]
                self.get_sample(filename, sample_index)
                return self.index[image_idx]

        class NPZReader(FormatReader):
            def __init__(self):
                self.open_file_map = {f"f{i}": np.zeros((4, 4, i + 1), dtype=np.uint8) for i in range(3)}
                self.index = [(f"f{i}", i) for i in range(3)]
            @dlp.log
            def open(self, filename):
                return self.open_file_map[filename]
            @dlp.log
            def get_sample(self, filename, sample_index):
                image = self.open_file_map[filename][..., sample_index]
                dlp.update(image_size=image.nbytes)

        r = NPZReader()
        for step, i in enumerate(range(3)):
            r.open(f"f{i}")
            r.read_index(i, step)
        r.open("f0")
        log.finalize()
        """
    )
    samples = r.events("NPZReader.get_sample")
    # pydftracer 2.0.6's type: image_size goes into its float args (float(value)).
    assert [_args(e) for e in samples] == [{"image_size": 16.0}] * 3
    assert all(type(e["args"]["image_size"]) is float for e in samples)
    # The call around it (read_index) was in progress: it has the value of its own sample.
    reads = r.events("FormatReader.read_index")
    assert [_args(e) for e in reads] == [{"image_idx": i, "step": i, "image_size": 16.0} for i in range(3)]
    # Calls after it (open) do not: pydftracer leaks it onto every later event of the dft_fn.
    opens = r.events("NPZReader.open")
    assert len(opens) == 4 and all("image_size" not in e["args"] for e in opens)


def test_update_args_inside_a_call_and_over_passed_values(run):
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        from dftracer.python.common import TagValue, TagDType
        log = dftracer.initialize_log()
        df = dft_fn("U", epoch=4)
        @df.log
        def work(x, step):
            df.update(step=step * 10, args={"k": "v", "n": x, "f": 0.5, "tv": TagValue(9, TagDType.INT)})
            if x == 2:
                raise ValueError("boom")
            return x
        @df.log
        def plain():
            return 1
        for x in range(3):
            try:
                work(x, step=x + 1)
            except ValueError:
                pass
            plain()
        # The tp_call path (not vectorcall) does the same.
        work.__call__(5, 6)
        log.finalize()
        """
    )
    got = [_args(e) for e in r.events("work")]
    want = [{"epoch": 4, "step": (x + 1) * 10, "k": "v", "n": x, "f": 0.5, "tv": 9} for x in range(3)]
    want.append({"epoch": 4, "step": 60, "k": "v", "n": 5, "f": 0.5, "tv": 9})
    assert got == want
    assert [_args(e) for e in r.events("plain")] == [{"epoch": 4}] * 3


def test_nested_and_recursive_calls_with_updates_at_each_level(run):
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("N")
        other = dft_fn("O")
        @df.log
        def outer():
            df.update(args={"outer": 1})
            inner()
            df.update(args={"after": 1})
        @df.log
        def inner():
            df.update(args={"inner": 2}, step=7)
            other_fn()
        @other.log
        def other_fn():
            df.update(args={"from_other": 3})   # df's update: on df's calls in progress
            other.update(args={"o": 1})
        @df.log
        def rec(n):
            df.update(args={f"level{n}": n})
            if n:
                rec(n - 1)
        outer()
        rec(2)
        log.finalize()
        """
    )
    assert [_args(e) for e in r.events("inner")] == [{"inner": 2, "step": 7, "from_other": 3}]
    assert [_args(e) for e in r.events("outer")] == [
        {"outer": 1, "inner": 2, "step": 7, "from_other": 3, "after": 1}]
    assert [_args(e) for e in r.events("other_fn")] == [{"o": 1}]
    # Innermost first (it ends first): each level has its own update and the deeper ones.
    assert [_args(e) for e in r.events("rec")] == [
        {"level0": 0},
        {"level1": 1, "level0": 0},
        {"level2": 2, "level1": 1, "level0": 0},
    ]


def test_two_threads_each_update_lands_on_its_own_call(run):
    """Two threads in the same decorated function at once (a barrier makes the calls
    overlap), each updating: each event has its own thread's values only."""
    r = run(
        """
        import threading, time
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("T")
        barrier = threading.Barrier(2)
        @df.log
        def work(who, i):
            barrier.wait()
            if who == "a" or i % 2:
                df.update(args={"who": who}, image_idx=i)
            time.sleep(0.002)   # the other thread runs, and updates, during this call
            barrier.wait()
        def loop(who):
            for i in range(20):
                work(who, i)
        ts = [threading.Thread(target=loop, args=(w,)) for w in ("a", "b")]
        for t in ts: t.start()
        for t in ts: t.join()
        log.finalize()
        """
    )
    ev = r.events("work")
    assert len(ev) == 40
    by_tid = {}
    for e in ev:
        by_tid.setdefault(e["tid"], []).append(_args(e))
    assert len(by_tid) == 2
    for calls in by_tid.values():
        whos = {c.get("who") for c in calls}
        if "a" in whos:
            assert calls == [{"who": "a", "image_idx": i} for i in range(20)]
        else:
            assert calls == [{"who": "b", "image_idx": i} if i % 2 else {} for i in range(20)]


def test_update_outside_any_call_is_not_on_the_next_call(run):
    """An update made outside a decorated call: on the dft_fn's own events (`with`, `flush()`),
    not on its decorated functions' calls, whether decorated before or after it (pydftracer
    2.0.6: on every later event of its decorated functions)."""
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("X", name="region", epoch=1)
        @df.log
        def before():
            return 1
        df.update(step=5, image_size=3, args={"k": "v"})
        before()
        @df.log
        def after():
            return 1
        after()
        with df:
            pass
        log.finalize()
        """
    )
    assert [_args(e) for e in r.events("before")] == [{"epoch": 1}]
    assert [_args(e) for e in r.events("after")] == [{"epoch": 1}]
    assert [_args(e) for e in r.events("region")] == [{"epoch": 1, "step": 5, "image_size": 3.0, "k": "v"}]


def test_generators_and_coroutines_record_what_their_own_code_updated(run):
    """The layer's Python wrappers: updates made while the generator's (coroutine's) code
    runs are on its event; those its consumer makes between its steps are not."""
    r = run(
        """
        import asyncio
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        df = dft_fn("G")
        @df.log
        def gen(step):
            df.update(args={"first": 1})
            got = yield 1
            df.update(args={"sent": got})
            try:
                yield 2
            except KeyError:
                df.update(args={"thrown": 1})
            yield 3
        @df.log
        def inner_call():
            df.update(args={"inner": 1})
        g = gen(4)
        next(g)
        df.update(args={"consumer": 1})
        assert g.send("s") == 2
        assert g.throw(KeyError()) == 3
        inner_call()              # a call between two steps: its own update only
        g.close()

        @df.log
        async def coro(image_idx):
            df.update(args={"c1": 1})
            await asyncio.sleep(0)
            df.update(image_size=7)
            return 5
        @df.log
        async def agen():
            df.update(args={"a": 1})
            yield 1
            yield 2
        async def bystander():
            df.update(args={"bystander": 1})   # another task, same thread
        async def main():
            t = asyncio.ensure_future(bystander())
            assert await coro(3) == 5
            await t
            items = []
            async for x in agen():
                df.update(args={"agen_consumer": 1})
                items.append(x)
            assert items == [1, 2]
        asyncio.run(main())
        log.finalize()
        """
    )
    assert [_args(e) for e in r.events("gen")] == [{"step": 4, "first": 1, "sent": "s", "thrown": 1}]
    assert [_args(e) for e in r.events("inner_call")] == [{"inner": 1}]
    assert [_args(e) for e in r.events("coro")] == [{"image_idx": 3, "c1": 1, "image_size": 7.0}]
    assert [_args(e) for e in r.events("agen")] == [{"a": 1}]
