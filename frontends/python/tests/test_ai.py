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
