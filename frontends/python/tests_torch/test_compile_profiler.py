"""`dftracer.python.dynamo` (torch.compile backends) and `dftracer.python.torch` (the profiler
bridge) on real PyTorch, on CPU. The oracles come from torch itself: a second compile of the
same model with a backend that only lists the ops of the graphs torch gives it, and the
profiler's own event list."""

import collections
import json

from conftest import self_contained, validate

MODEL = """
import json, os, sys
import torch
from torch._dynamo.backends.common import aot_autograd

torch.manual_seed(0)


def make_model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    )


def listing(kinds):
    # The oracle: the op names of each graph torch compiles, named as pydftracer names them.
    from dftracer.python.dynamo import create_detailed_op_name

    def compiler(kind):
        def compile_graph(gm, example_inputs):
            names = [create_detailed_op_name(n, gm) for n in gm.graph.nodes
                     if n.op in ("call_module", "call_function", "call_method")]
            kinds.setdefault(kind, []).append(names)
            return gm.forward
        return compile_graph
    return compiler


x = torch.randn(2, 3, 8, 8)
"""

COMPILE = MODEL + """
from functorch.compile import make_boxed_func
from dftracer.python import dftracer
from dftracer.python.dynamo import dynamo, create_backend

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
RUNS = 3
# dynamo.compile: AOT Autograd's forward and backward graphs.
model = make_model()
compiled = dynamo.compile(model)
for _ in range(RUNS):
    compiled(x).sum().backward()
# create_backend(autograd=False): Dynamo's graph, with the tracer's args.
plain = torch.compile(make_model(), backend=create_backend(name="my_model", epoch=3, autograd=False))
with torch.no_grad():
    for _ in range(RUNS):
        plain(x)
log.finalize()

kinds = {}
lister = listing(kinds)
torch._dynamo.reset()
oracle = torch.compile(make_model(), backend=aot_autograd(
    fw_compiler=lambda gm, ex: make_boxed_func(lister("forward")(gm, ex)),
    bw_compiler=lambda gm, ex: make_boxed_func(lister("backward")(gm, ex))))
oracle(x).sum().backward()
torch.compile(make_model(), backend=lister("inference"))(x)
print(json.dumps({"runs": RUNS, "graphs": kinds}))
"""


def test_dynamo_records_every_op_of_every_compiled_graph(run, tmp_path):
    r = run(COMPILE, timeout=600)
    want = json.loads(r.stdout.strip().splitlines()[-1])
    runs, graphs = want["runs"], want["graphs"]
    assert set(graphs) == {"forward", "backward", "inference"}
    assert all(len(g) == 1 for g in graphs.values()), graphs  # one graph each: no graph break
    (path, recs), = r.traces().items()
    self_contained(recs)
    validate([path])
    ev = [e for e in recs if e.get("ph") == 1 and e.get("cat") == "dynamo"]
    for kind, (ops,) in graphs.items():
        assert ops, kind
        calls = [e for e in ev if e["name"] == f"graph.{kind}"]
        assert len(calls) == runs, (kind, len(calls))
        assert all(c["args"]["ops"] == len(ops) for c in calls)
        # Every op of every run, by name, inside its graph's event.
        inside = collections.Counter()
        for c in calls:
            t0, t1 = c["ts"], c["ts"] + c["dur"]
            inside.update(e["name"] for e in ev if not e["name"].startswith("graph.") and t0 <= e["ts"] and e["ts"] + e["dur"] <= t1
                          and e["args"].get("epoch") == (3 if kind == "inference" else None))
        assert inside == collections.Counter({n: runs * ops.count(n) for n in ops}), (kind, inside)
    grad = {e["args"]["grad_enabled"] for e in ev if e["name"] in graphs["inference"][0]}
    assert grad == {0}  # run under no_grad
    assert any(n.startswith("function.") for n in graphs["forward"][0])
    end = next(x for x in recs if x["name"] == "end")
    assert end["args"]["used"]["dynamo"] == 1


def test_dynamo_with_tracing_off_compiles_nothing_and_writes_nothing(run):
    r = run(
        """
        import torch
        from dftracer.python.dynamo import dynamo, create_backend
        model = torch.nn.Linear(4, 2)
        assert dynamo.compile(model) is model          # pydftracer: the model itself
        plain = torch.compile(model, backend=create_backend(autograd=False))
        assert torch.equal(plain(torch.ones(1, 4)), model(torch.ones(1, 4)))
        from dftracer.python import Dynamo, create_backend as cb
        assert cb is create_backend and Dynamo is type(dynamo)
        print("ok")
        """,
        enable=False,
    )
    assert r.stdout.strip() == "ok"
    assert r.files() == []


PROFILE = """
import json
import torch
from dftracer.python import dftracer, dft_fn
from dftracer.python.torch import trace_handler

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
a, b = torch.randn(64, 64), torch.randn(64, 64)
dft = dftracer.get_instance()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], on_trace_ready=trace_handler,
                            record_shapes=True) as prof:
    t0 = dft.get_time()
    for _ in range(5):
        torch.mm(a, b)
    t1 = dft.get_time()
events = prof.events()
log.finalize()
print(json.dumps({"t0": t0, "t1": t1, "n": len(events),
                  "names": sorted(e.key for e in events)}))
"""


def test_profiler_events_land_in_our_trace_on_our_clock(run):
    r = run(PROFILE, timeout=300)
    want = json.loads(r.stdout.strip().splitlines()[-1])
    (path, recs), = r.traces().items()
    self_contained(recs)
    validate([path])
    pp = [e for e in recs if e.get("ph") == 1 and e.get("cat") == "PP"]
    assert len(pp) == want["n"] and sorted(e["name"] for e in pp) == want["names"]
    mm = [e for e in pp if e["name"] == "aten::mm"]
    assert len(mm) == 5
    # Aligned: each mm, as placed by the bridge, lies between our clock's readings taken just
    # before and after the loop (1 ms of slack for the two clocks' rounding).
    for e in mm:
        assert want["t0"] - 1000 <= e["ts"] and e["ts"] + e["dur"] <= want["t1"] + 1000, (e, want)
    for e in mm:
        assert set(e["args"]) >= {"device", "cpu_memory", "is_remote", "device_memory_usage", "input_size",
                                  "total_cpu_percent", "total_device_percent"}
        assert e["args"]["input_size"] == 4  # two 2-d inputs
    end = next(x for x in recs if x["name"] == "end")
    assert end["args"]["used"]["torch_profiler"] == 1
