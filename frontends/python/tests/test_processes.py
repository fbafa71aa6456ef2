"""Workers of a traced program are traced, with no user code, each in its own complete file."""

import pytest

from conftest import self_contained

MP = """
import os, sys, multiprocessing as mp
from dftracer.python import dftracer, dft_fn
df = dft_fn("WORK")
@df.log
def task(x): return x * x
def main():
    log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
    ctx = mp.get_context(sys.argv[1])
    for i in range(5): task(i)
    if sys.argv[2] == "with":
        with ctx.Pool(2) as p:
            assert p.map(task, range(40)) == [x * x for x in range(40)]
    else:
        p = ctx.Pool(2)
        assert p.map(task, range(40)) == [x * x for x in range(40)]
        p.close(); p.join()
    log.finalize()
if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("shutdown", ["with", "close"])
def test_pool_workers_lose_nothing(run, method, shutdown):
    r = run(MP, args=[method, shutdown])
    traces = r.traces()
    assert len(r.events("task")) == 45, {str(f): sum(x["name"] == "task" for x in t) for f, t in traces.items()}
    for f, recs in traces.items():
        self_contained(recs)
    assert len(traces) >= 2, "workers wrote their own files"


def test_process_leaving_through_os_exit(run):
    r = run(
        """
        import os, multiprocessing as mp
        from dftracer.python import dftracer, dft_fn
        df = dft_fn("W")
        @df.log
        def job(i): return i
        def child():
            for i in range(25): job(i)
            os._exit(0)
        if __name__ == "__main__":
            dftracer.initialize_log()
            for ctxname in ("fork", "spawn"):
                p = mp.get_context(ctxname).Process(target=child)
                p.start(); p.join()
                assert p.exitcode == 0
            pid = os.fork()
            if pid == 0:
                for i in range(7): job(i)
                os._exit(3)
            _, st = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(st) == 3
        """
    )
    assert len(r.events("job")) == 57
    fork_files = [f for f in r.files() if f.name.endswith("-fork.pfw.gz")]
    assert len(fork_files) == 2


def test_dataloader_style_spawned_workers_that_only_import(run):
    # Workers import the annotated module; the main script initializes inside main().
    r = run(
        """
        import multiprocessing as mp
        from dftracer.python import dftracer
        import dataset
        def main():
            dftracer.initialize_log()
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            ws = [ctx.Process(target=dataset.worker_loop, args=(w, q)) for w in range(2)]
            for w in ws: w.start()
            got = sorted(q.get() for _ in range(20))
            for w in ws: w.join()
            assert got == sorted(i * 10 + w for w in range(2) for i in range(10))
            dataset.Dataset()[0]
        if __name__ == "__main__":
            main()
        """,
        module_files={
            "dataset.py": """
                from dftracer.python import dft_fn
                df = dft_fn("data")
                class Dataset:
                    @df.log
                    def __getitem__(self, i):
                        return i
                def worker_loop(w, q):
                    ds = Dataset()
                    for i in range(10):
                        q.put(ds[i] * 10 + w)
            """
        },
    )
    assert len(r.events("Dataset.__getitem__")) == 21
    for recs in r.traces().values():
        self_contained(recs)


def test_subprocess_child_inherits_the_prefix(run):
    r = run(
        """
        import subprocess, sys, os
        from dftracer.python import dftracer, dft_fn
        dftracer.initialize_log(logfile=os.environ["OUT"] + "/sub/run")
        with dft_fn("p", name="parent"):
            subprocess.run([sys.executable, "-c",
                "from dftracer.python import dft_fn\\nwith dft_fn('c', name='child'): pass"], check=True)
        """
    )
    assert len(r.events("parent")) == 1 and len(r.events("child")) == 1
    assert all(f.parent.name == "sub" for f in r.files())
