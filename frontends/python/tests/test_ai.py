"""dftracer.python.ai: the AI-workload API, checked on the trace (reference §5.3 names)."""


def test_ai_annotations(run):
    r = run(
        """
        from dftracer.python import dftracer
        from dftracer.python.ai import ai, get_iter_block_name, get_iter_handle_name
        log = dftracer.initialize_log()
        @ai.compute.forward
        def fwd(x): return x
        @ai.data.item
        def item(i): return i
        ai.pipeline.train.start(metadata=True)
        for e in ai.pipeline.epoch.iter(range(2)):
            for s, b in enumerate(ai.dataloader.fetch.iter(range(3))):
                ai.update(epoch=e, step=s)
                fwd(item(b))
                with ai.comm.all_reduce:
                    pass
        with ai.checkpoint.capture:
            with ai.checkpoint.io.write(args={"path": "/ckpt/x"}):
                pass
        ai.pipeline.train.stop(metadata=True)
        assert get_iter_block_name("a") == "a.block" and get_iter_handle_name("a") == "a.iter"
        log.finalize()
        """
    )
    ev = r.events()
    cat_of = {(e["name"], e["cat"]) for e in ev}
    for pair in [
        ("forward", "compute"), ("item", "data"), ("all_reduce", "comm"),
        ("fetch.iter", "dataloader"), ("fetch.block", "dataloader"),
        ("epoch.iter", "pipeline"), ("epoch.block", "pipeline"),
        ("capture", "checkpoint"), ("checkpoint.io.write", "checkpoint"),
    ]:
        assert pair in cat_of, (pair, sorted(cat_of))
    assert len(r.events("forward")) == 6 and len(r.events("fetch.iter")) == 6
    fetch = r.events("fetch.block")
    assert [e["args"]["count"] for e in fetch] == [1, 2, 3, 1, 2, 3]
    assert fetch[-1]["args"]["epoch"] == 1 and fetch[-1]["args"]["step"] == 2
    assert r.events("checkpoint.io.write")[0]["args"]["path"] == "/ckpt/x"
    cm = {x["args"]["name"] for x in r.records() if x["name"] == "CM"}
    assert {"train.start", "train.end"} <= cm
    end = [x for x in r.records() if x["name"] == "end"][0]["args"]
    assert end["used"]["ai"] == 1


def test_the_package_exports_the_ai_singleton_as_pydftracer_does(run):
    """`from dftracer.python import ai` is the singleton (the README's pointer), and
    importing the package records nothing and creates no file until something is traced."""
    r = run(
        """
        import os
        from dftracer.python import ai, dftracer, DFTracerAI
        import dftracer.python.ai as m_or_singleton
        assert isinstance(ai, DFTracerAI) and ai is m_or_singleton
        assert not os.listdir(os.environ["OUT"]), "import alone created a trace file"
        from dftracer.python.ai import ai as same
        assert same is ai
        log = dftracer.initialize_log()
        @ai.compute.forward
        def fwd(x): return x
        fwd(1)
        log.finalize()
        """
    )
    assert len(r.events("forward")) == 1
    end = [x for x in r.records() if x["name"] == "end"][0]["args"]
    assert end["used"]["ai"] == 1


def test_importing_the_package_alone_marks_nothing(run):
    r = run(
        """
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log()
        with dft_fn("x", name="y"):
            pass
        log.finalize()
        """
    )
    end = [x for x in r.records() if x["name"] == "end"][0]["args"]
    assert "ai" not in end["used"], end["used"]
