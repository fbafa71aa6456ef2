"""DLIO benchmark 2.0.0 (from PyPI), traced by our wheel: generation, three epochs of training
through two DataLoader worker processes, checkpoints. Run as a user runs it: `dlio_benchmark`
with DFTRACER_ENABLE=1, DFTRACER_LOG_FILE and DFTRACER_DATA_DIR (the dataset) set; DLIO itself
calls `initialize_log(logfile=<output>/trace-<rank>-of-<n>.pfw, data_dir="<data>:...:<checkpoints>")`
after some of its decorated `__init__`s have already recorded events, and again in each spawned
DataLoader worker (`worker_init`), and `finalize()` from inside its decorated `finalize`.

Every expected number comes from the workload file and from what the run left outside the
tracer: the dataset and checkpoint files on disk, DLIO's own log (`dlio.log`: its steps) and
stats (`per_epoch_stats.json`: its checkpoints). The trace files are read back as gzip JSON
lines; events are DLIO's own (`<Class>.<method>` in DLIO's categories) and our POSIX events.

Configurations: one process with forked workers (DLIO's default), one with spawned workers,
and two ranks under Open MPI's mpirun with forked workers (when mpirun.openmpi is there; DLIO's
spawned workers cannot start under mpirun)."""

import collections
import math
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CONFIG, validate

CONFIGS = [
    pytest.param((1, "fork"), id="1rank-fork"),
    pytest.param((1, "spawn"), id="1rank-spawn"),
    pytest.param(
        (2, "fork"),
        id="2ranks-mpirun-fork",
        marks=pytest.mark.skipif(not shutil.which("mpirun.openmpi"), reason="no mpirun.openmpi (Open MPI)"),
    ),
]

D = CONFIG["dataset"]
R = CONFIG["reader"]
T = CONFIG["train"]
C = CONFIG["checkpoint"]
WORKERS = R["read_threads"]
EPOCHS = T["epochs"]
BATCH = R["batch_size"]
OPEN_CALLS = ("open", "open64", "openat", "openat64", "__open_2", "__open64_2")
WRITE_CALLS = ("write", "pwrite", "pwrite64", "writev")


@pytest.fixture(params=CONFIGS)
def run(request, dlio_run):
    ranks, ctx = request.param
    r = dlio_run(ranks, ctx)
    assert r.proc.returncode == 0, r.describe()
    return r


class Ranked:
    """A run's trace files sorted into each rank's main process and its DataLoader workers."""

    def __init__(self, run):
        self.run = run
        self.traces = run.traces()
        self.main = {}  # rank -> Trace
        self.workers = collections.defaultdict(list)  # rank -> [Trace]
        self.other = []
        for t in self.traces:
            m = re.match(r"trace-(\d+)-of-(\d+)", t.path.name)
            rank = int(m.group(1)) if m else None
            if t.named("DLIOBenchmark.run"):
                assert rank not in self.main, f"two main files for rank {rank}: {t.path}, {self.main[rank].path}"
                self.main[rank] = t
            elif t.named("TorchDataset.__getitem__"):
                self.workers[rank].append(t)
            else:
                self.other.append(t)


@pytest.fixture
def ranked(run):
    return Ranked(run)


def steps_per_epoch(ranks):
    """DLIO's `max_steps` (main.py `_train`), from the workload."""
    return math.floor(D["num_samples_per_file"] * D["num_files_train"] / BATCH / ranks)


def checkpoint_epochs():
    """The epochs `_train` checkpoints at (epoch based: steps_between_checkpoints < 0)."""
    assert C.get("steps_between_checkpoints", -1) < 0
    first, every = C["checkpoint_after_epoch"], C["epochs_between_checkpoints"]
    return [e for e in range(1, EPOCHS + 1) if e >= first and (e - first) % every == 0]


def epoch_windows(main):
    """{epoch: (start, end)} of the main process's `DLIOBenchmark._train(epoch)` events."""
    out = {}
    for e in main.named("DLIOBenchmark._train", "dlio_benchmark"):
        out[e["args"]["epoch"]] = (e["ts"], e["ts"] + e["dur"])
    return out


def within(e, window):
    return window[0] <= e["ts"] and e["ts"] + e["dur"] <= window[1]


def inside(child, parent):
    return (
        child["pid"] == parent["pid"]
        and child["tid"] == parent["tid"]
        and parent["ts"] <= child["ts"]
        and child["ts"] + child["dur"] <= parent["ts"] + parent["dur"]
    )


# ---- what the run did, outside the tracer ---------------------------------------------------


def test_the_run_did_what_the_workload_says(run):
    """The ground truth the other tests compare the traces with, checked against the workload:
    the dataset on disk, DLIO's own steps (its log) and checkpoints (its stats and files)."""
    assert len(run.dataset()) == D["num_files_train"]
    s = steps_per_epoch(run.ranks)
    log = run.dlio_log()
    assert f"Max steps per epoch: {s} = " in log, log[-2000:]
    # `batch_processed` logs one line per step; every rank appends to this log: rank 0's.
    processed = re.findall(r"Rank 0 step (\d+) processed", log)
    assert len(processed) == EPOCHS * s, (len(processed), EPOCHS, s)
    stats = run.per_epoch_stats()
    ckpt_epochs = sorted(int(e) for e, v in stats.items() if any(k.startswith("ckpt") for k in v))
    assert ckpt_epochs == checkpoint_epochs()
    on_disk = sorted({int(p.name.split("-")[-3]) for p in run.checkpoints()})
    assert on_disk == checkpoint_epochs(), [p.name for p in run.checkpoints()]
    # model + num_layers layer files per checkpoint (rank 0 only: checkpoint type rank_zero)
    assert len(run.checkpoints()) == len(checkpoint_epochs()) * (1 + C["num_layers"])


# ---- the trace files ------------------------------------------------------------------------


def test_every_process_leaves_one_complete_file(run, ranked):
    """One file per rank's main process and per DataLoader worker (persistent workers: DLIO
    builds its DataLoader once, read_threads workers per rank), each complete: start first,
    end last, ids 1..n, num_events right, nothing dropped or lost. All are where DLIO's
    initialize_log put them (the API path wins over DFTRACER_LOG_FILE), none elsewhere."""
    files = run.trace_files()
    assert files, "no trace file at all"
    assert not ranked.other, f"files of neither a main process nor a worker: {[t.path for t in ranked.other]}"
    assert sorted(ranked.main) == list(range(run.ranks)), [t.path.name for t in ranked.traces]
    for rank in range(run.ranks):
        assert len(ranked.workers[rank]) == WORKERS, (rank, [t.path.name for t in ranked.workers[rank]])
    for t in ranked.traces:
        assert t.path.parent == run.output, f"{t.path} is not in DLIO's output folder {run.output}"
        assert t.path.name.startswith(f"trace-"), t.path
        recs = t.records
        ph1 = [r for r in recs if r.get("ph") == 1]
        assert ph1[0]["name"] == "start" and recs[-1]["name"] == "end", t.path
        assert [r["id"] for r in ph1] == list(range(1, len(ph1) + 1)), t.path
        end = t.end
        assert end is not None, t.path
        assert end["args"]["num_events"] == len(ph1) - 1, t.path
        assert end["args"]["dropped"] == 0 and end["args"]["lost"] == 0, (t.path, end["args"])
        assert t.pid is not None, f"{t.path}: records of more than one pid"
    pids = [t.pid for t in ranked.traces]
    assert len(set(pids)) == len(pids), "two files of one process"
    for rank, main in ranked.main.items():
        assert main.path.name.startswith(f"trace-{rank}-of-{run.ranks}-"), main.path
        assert main.path.name.endswith("-app.pfw.gz"), main.path
        for w in ranked.workers[rank]:
            if run.ctx == "spawn":
                # worker_init's own initialize_log(logfile=".../trace-R-of-N-<pid>.pfw")
                assert w.path.name.startswith(f"trace-{rank}-of-{run.ranks}-{w.pid}-"), w.path
                assert w.path.name.endswith("-app.pfw.gz"), w.path
            else:
                # a forked child of the main process: its prefix, suffix fork
                assert w.path.name.startswith(f"trace-{rank}-of-{run.ranks}-"), w.path
                assert w.path.name.endswith("-fork.pfw.gz"), w.path
            assert w.records[0]["pid"] != main.pid
    left = sorted(run.log_prefix.parent.glob("*")) if run.log_prefix.parent.exists() else []
    assert left == [], f"files left under DFTRACER_LOG_FILE's directory: {left}"


def test_dftracer_utils_validates_every_file(run):
    validate(run.trace_files())


# ---- DLIO's events against what DLIO did ------------------------------------------------------


def test_training_steps_and_epochs(run, ranked):
    """Every training step DLIO took is one `TorchFramework.compute`; every epoch one
    `DLIOBenchmark._train` with its epoch number; the DataLoader's generator one
    `TorchDataLoader.next` per epoch."""
    s = steps_per_epoch(run.ranks)
    processed = len(re.findall(r"Rank 0 step (\d+) processed", run.dlio_log()))
    for rank, main in ranked.main.items():
        assert len(main.named("TorchFramework.compute", "ai_framework")) == processed == EPOCHS * s
        train = main.named("DLIOBenchmark._train", "dlio_benchmark")
        assert sorted(e["args"].get("epoch") for e in train) == list(range(1, EPOCHS + 1))
        assert len(main.named("TorchDataLoader.next", "data_loader")) == EPOCHS
        assert len(main.named("DLIOBenchmark.run", "dlio_benchmark")) == 1
        assert len(main.named("DLIOBenchmark.initialize", "dlio_benchmark")) == 1
        # each step's compute lies in its epoch's _train
        windows = epoch_windows(main)
        per_epoch = collections.Counter(
            next((ep for ep, w in windows.items() if within(e, w)), None)
            for e in main.named("TorchFramework.compute")
        )
        assert per_epoch == {ep: s for ep in range(1, EPOCHS + 1)}, per_epoch


def test_events_before_initialize_log_are_kept(run, ranked):
    """DLIO records events (`TorchFramework.__init__`, `FileStorage.__init__`, decorated with
    `log_init`) before it calls initialize_log; they are in the main file, before DLIO's
    `DLIOBenchmark.__init__` region (opened right after initialize_log)."""
    for main in ranked.main.values():
        (fw,) = main.named("TorchFramework.__init__", "ai_framework")
        (init,) = main.named("DLIOBenchmark.__init__", "dlio_benchmark")
        assert fw["ts"] + fw["dur"] <= init["ts"]


def test_each_sample_read_once_per_epoch_split_over_the_workers(run, ranked):
    """Per epoch (the main's `_train(epoch)` window) and worker: DLIO's reads of that worker
    (`TorchDataset.__getitem__` with its image_idx, `NPZReader.open`), the DataLoader's
    round-robin share of the epoch's batches; together each of the rank's samples once."""
    s = steps_per_epoch(run.ranks)
    n = D["num_files_train"] * D["num_samples_per_file"]
    per_rank = math.ceil(n / run.ranks)
    for rank, main in ranked.main.items():
        windows = epoch_windows(main)
        assert sorted(windows) == list(range(1, EPOCHS + 1))
        # DataLoader: batch b of an epoch goes to worker b % WORKERS
        share = sorted(len(range(k, s, WORKERS)) * BATCH for k in range(WORKERS))
        for ep, w in windows.items():
            got, idx = [], []
            for t in ranked.workers[rank]:
                items = [e for e in t.named("TorchDataset.__getitem__", "data_loader") if within(e, w)]
                opens = [e for e in t.named("NPZReader.open", "reader") if within(e, w)]
                assert len(opens) == len(items), (t.path.name, ep, len(opens), len(items))
                got.append(len(items))
                idx += [e["args"]["image_idx"] for e in items]
            assert sorted(got) == share, (rank, ep, got, share)
            expected = list(range(rank * per_rank, rank * per_rank + s * BATCH))
            assert sorted(idx) == expected, (rank, ep)
        # and no read outside the epochs
        for t in ranked.workers[rank]:
            items = t.named("TorchDataset.__getitem__", "data_loader")
            assert all(any(within(e, w) for w in windows.values()) for e in items), t.path.name


def test_posix_reads_of_each_sample_file_inside_its_getitem(run, ranked):
    """Our I/O events in the workers: inside every `TorchDataset.__getitem__(image_idx)` the
    worker opens exactly one dataset file, the one DLIO maps that sample to (file
    image_idx // samples_per_file of the sorted dataset on disk), and reads from it; no
    dataset file is opened outside a `__getitem__`."""
    dataset = run.dataset()
    spf = D["num_samples_per_file"]
    in_dataset = set(dataset).__contains__
    for rank in range(run.ranks):
        for t in ranked.workers[rank]:
            items = t.named("TorchDataset.__getitem__", "data_loader")
            opens = [e for e in t.posix_on(in_dataset) if e["name"] in OPEN_CALLS]
            reads = [e for e in t.posix_on(in_dataset) if e["name"] in ("read", "pread", "pread64")]
            assert opens and reads, f"{t.path.name}: no POSIX open/read of a dataset file"
            unplaced = list(opens)
            for item in items:
                mine = [o for o in opens if inside(o, item)]
                assert [t.path_of(o) for o in mine] == [dataset[item["args"]["image_idx"] // spf]], (
                    t.path.name,
                    item,
                    [t.path_of(o) for o in mine],
                )
                for o in mine:
                    unplaced.remove(o)
                assert any(inside(r, item) for r in reads), (t.path.name, item)
            assert not unplaced, f"{t.path.name}: dataset opens outside any __getitem__: {unplaced[:3]}"
            assert all(o["args"]["ret"] >= 0 for o in opens)


def test_generation_writes_every_dataset_file(run, ranked):
    """Data generation (rank r writes files r, r+n, ...): one `NPZGenerator.generate` per rank,
    and for each file on disk our POSIX events in its writer's file: one open for writing and
    writes of at least the file's size (zipfile also rewrites its headers)."""
    dataset = run.dataset()
    writers = {}
    for rank, main in ranked.main.items():
        assert len(main.named("NPZGenerator.generate", "generator")) == 1
        for o in main.posix_on(set(dataset).__contains__):
            if o["name"] in OPEN_CALLS and o["args"].get("flags", 0) & (os.O_WRONLY | os.O_RDWR):
                writers.setdefault(main.path_of(o), []).append((rank, o))
    assert sorted(writers) == dataset, sorted(set(dataset) - set(writers))[:5]
    for i, path in enumerate(dataset):
        assert len(writers[path]) == 1, (path, writers[path])
        rank, _ = writers[path][0]
        assert rank == i % run.ranks
        main = ranked.main[rank]
        written = sum(
            e["args"]["ret"] for e in main.posix_on(path.__eq__) if e["name"] in WRITE_CALLS and e["args"]["ret"] > 0
        )
        assert written >= os.path.getsize(path) > 0, (path, written, os.path.getsize(path))


def test_checkpoints(run, ranked):
    """Each checkpoint DLIO took (its stats, the files on disk) is one
    `PyTorchCheckpointing.checkpoint(epoch)` and each checkpoint file one `save_state`, on rank 0
    (checkpoint type rank_zero); none on other ranks."""
    files = run.checkpoints()
    epochs = checkpoint_epochs()
    for rank, main in ranked.main.items():
        ck = main.named("PyTorchCheckpointing.checkpoint", "checkpoint")
        saves = main.named("PyTorchCheckpointing.save_state", "checkpoint")
        if rank == 0:
            assert sorted(e["args"].get("epoch") for e in ck) == epochs
            assert len(saves) == len(files)
            assert all(any(inside(s, c) for c in ck) for s in saves)
        else:
            assert len(ck) == len(epochs)  # every rank calls checkpoint(); only rank 0 saves
            assert saves == []


def test_checkpoint_files_written_in_posix_events(run, ranked):
    """Our POSIX events on the checkpoint folder: every checkpoint file on disk opened for
    writing once by rank 0, inside a `save_state`, and written in full (torch.save into a
    Python file object writes sequentially: the writes add up to the file's size).

    This is "a late initialize_log(data_dir=...) wins": the checkpoint folder reaches the
    tracer only through DLIO's initialize_log(data_dir=...), which comes after decorated
    __init__s started tracing with DFTRACER_DATA_DIR (the dataset only). Before that fix
    (main 4302dfb) the first start's data dirs stayed and no checkpoint I/O was recorded."""
    main = ranked.main[0]
    files = [str(p) for p in run.checkpoints()]
    saves = main.named("PyTorchCheckpointing.save_state", "checkpoint")
    in_ckpt = lambda p: p.startswith(str(run.ckpt) + os.sep)
    events = main.posix_on(in_ckpt)
    opened = collections.Counter(
        main.path_of(e)
        for e in events
        if e["name"] in OPEN_CALLS and e["args"].get("flags", 0) & (os.O_WRONLY | os.O_RDWR)
    )
    assert opened == {f: 1 for f in files}, (
        f"checkpoint files opened for writing in the trace: {dict(opened)}; on disk: {files}"
    )
    for f in files:
        mine = [e for e in events if main.path_of(e) == f]
        assert all(any(inside(e, s) for s in saves) for e in mine), f
        written = sum(e["args"]["ret"] for e in mine if e["name"] in WRITE_CALLS and e["args"]["ret"] > 0)
        assert written == os.path.getsize(f), (f, written, os.path.getsize(f))
    for rank, other in ranked.main.items():
        if rank != 0:  # only rank 0 writes checkpoints
            assert [e for e in other.posix_on(in_ckpt) if e["name"] in WRITE_CALLS] == []


def test_counts_per_category_and_name(run, ranked):
    """The (cat, name) counts of the DLIO events that the run's ground truth determines, per
    rank's main process and summed over its workers, all at once (a readable diff)."""
    s = steps_per_epoch(run.ranks)
    reads = EPOCHS * s * BATCH
    n_ckpt = len(checkpoint_epochs())
    for rank, main in ranked.main.items():
        want_main = {
            ("dlio_benchmark", "DLIOBenchmark.run"): 1,
            ("dlio_benchmark", "DLIOBenchmark.initialize"): 1,
            ("dlio_benchmark", "DLIOBenchmark._train"): EPOCHS,
            ("ai_framework", "TorchFramework.compute"): EPOCHS * s,
            ("data_loader", "TorchDataLoader.read"): 1,
            ("data_loader", "TorchDataLoader.next"): EPOCHS,
            ("generator", "NPZGenerator.generate"): 1,
            ("checkpoint", "PyTorchCheckpointing.checkpoint"): n_ckpt,
            ("checkpoint", "PyTorchCheckpointing.save_state"): len(run.checkpoints()) if rank == 0 else 0,
        }
        got = collections.Counter((e["cat"], e["name"]) for e in main.events)
        assert {k: got.get(k, 0) for k in want_main} == want_main
        want_workers = {
            ("data_loader", "TorchDataset.worker_init"): WORKERS,
            ("data_loader", "TorchDataset.__getitem__"): reads,
            ("reader", "NPZReader.read_index"): reads,
            ("reader", "NPZReader.open"): reads,  # read_type on_demand: one open per sample
            ("reader", "NPZReader.get_sample"): reads,
            ("reader", "NPZReader.close"): reads,
        }
        got = collections.Counter((e["cat"], e["name"]) for t in ranked.workers[rank] for e in t.events)
        assert {k: got.get(k, 0) for k in want_workers} == want_workers


# ---- the module DLIO imports ---------------------------------------------------------------


def test_dlio_imports_our_dftracer_logger():
    """DLIO 2.0.0 imports `from dftracer.logger import dftracer, dft_fn, DFTRACER_ENABLE`
    (pydftracer 1.x's path; without it DLIO cannot even be imported: its fallback classes take
    no argument and its module-level `Profile(MODULE_CONFIG)` raises TypeError). In this venv
    (DLIO installed --no-deps) that is our layer's module, over our native module."""
    code = (
        "import dftracer, dftracer.logger as m\n"
        "from dftracer.logger import dftracer as t, dft_fn, DFTRACER_ENABLE\n"
        "assert DFTRACER_ENABLE is True\n"
        "print(m.__file__)\n"
    )
    env = dict(os.environ, DFTRACER_ENABLE="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "/dftracer/_layer/" in proc.stdout, proc.stdout
