"""Multi-node for real: nodes simulated with UTS namespaces, Open MPI and MPICH `mpirun -np 4`
of an mpi4py program, and a Slurm cluster of two nodes (slurmctld, two slurmd each in its own
UTS namespace, munged) started here, running examples/multinode_service.sh's srun branch.
Every assertion is on the trace files the real processes wrote, checked against what the
processes say they did (tests/multinode/app.py) and against /proc.

Needs root, unshare/nsenter, the Debian packages slurm-wlm, munge, openmpi-bin, mpich, and
mpi4py in this venv (scripts/test.sh `multinode` installs them). Every daemon started here is
stopped here, by its pid, also when a test fails.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import traces  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SVC = os.path.join(ROOT, "target", "release", "dftracer_service")
EXAMPLE = os.path.join(ROOT, "examples", "multinode_service.sh")
APP = os.path.join(ROOT, "tests", "multinode", "app.py")
WORK = os.path.join(ROOT, "target", "multinode")
PY = sys.executable


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def run(cmd, env=None, timeout=120, check=True, **kw):
    r = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def trace_env(d, **extra):
    env = dict(os.environ)
    env.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=os.path.join(d, "traces", "app"),
               DFTRACER_DATA_DIR=os.path.join(d, "data"), DFTRACER_TRACE_INTERVAL_MS="200")
    env.update(extra)
    return env


def alive(pid):
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def ours_left(d):
    """Processes (pid, cmdline) whose command line names the run directory `d` or that are a
    dftracer_service: what must not outlive a job."""
    me, left = os.getpid(), []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if alive(int(p)) and (d in cmd or (SVC in cmd and d in cmd)):
            left.append((int(p), cmd))
    return left


def wait_for(what, pred, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# --------------------------------------------------------------- nodes as UTS namespaces

class Node:
    """A node: a process in a UTS namespace of its own with hostname `name`, sharing the file
    system; `on(...)` runs a command there (nsenter), as `ssh node cmd` would."""

    def __init__(self, name):
        self.name = name
        self.proc = subprocess.Popen(["unshare", "--uts", "--", "sh", "-c", f"hostname {name} && exec sleep 600"])
        wait_for(f"node {name}", lambda: self.hostname() == name, 10)

    def hostname(self):
        r = subprocess.run(["nsenter", "-t", str(self.proc.pid), "-u", "--", "hostname"],
                           capture_output=True, text=True)
        return r.stdout.strip()

    def uts(self):
        return os.readlink(f"/proc/{self.proc.pid}/ns/uts")

    def on(self, *cmd, **kw):
        return run(["nsenter", "-t", str(self.proc.pid), "-u", "--", *cmd], **kw)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def test_nodes_with_their_own_hostnames_share_one_log_and_state_directory():
    d = fresh("uts")
    state, out = os.path.join(d, "state"), os.path.join(d, "traces")
    env = trace_env(d, DFTRACER_LOG_FILE=os.path.join(out, "node"))
    names = ["node-a", "node-b", "node-c"]
    nodes = {n: Node(n) for n in names}
    daemons = []
    try:
        for n in names:
            r = nodes[n].on(SVC, "start", state, env=env)
            assert f"started on {n} " in r.stdout, r.stdout
        pids = {}
        for n in names:
            # Per host: its own PID file naming a daemon in that node's namespace, its own trace.
            with open(os.path.join(state, f"dftracer_server_{n}.pid")) as f:
                pids[n] = int(f.read())
            daemons.append(pids[n])
            assert os.readlink(f"/proc/{pids[n]}/ns/uts") == nodes[n].uts()
            assert os.path.exists(os.path.join(out, f"node_{n}.pfw.gz"))
        assert len(set(pids.values())) == 3

        # `stop` on one node: that daemon is gone when it returns, its trace complete; the
        # other nodes' services run on.
        r = nodes["node-b"].on(SVC, "stop", state)
        assert not os.path.exists(f"/proc/{pids['node-b']}"), "node-b's daemon outlived `stop`"
        assert "trace" in r.stdout and "complete" in r.stdout, r.stdout
        recs = traces.complete(os.path.join(out, "node_node-b.pfw.gz"))
        assert traces.host_of(recs) == "node-b"
        assert any(x.get("ph") == 2 for x in recs), "no counter record in node-b's trace"
        assert not os.path.exists(os.path.join(state, "dftracer_server_node-b.pid"))
        for n in ("node-a", "node-c"):
            assert alive(pids[n]), f"{n}'s daemon stopped with node-b's"
            assert nodes[n].on(SVC, "status", state, check=False).returncode == 0
        # `status` on node-b says not running, even though other hosts' PID files are there.
        assert nodes["node-b"].on(SVC, "status", state, check=False).returncode == 3

        # node-c dies (SIGKILL: no chance to clean up): its PID file stays behind.
        os.kill(pids["node-c"], signal.SIGKILL)
        wait_for("node-c's daemon to die", lambda: not alive(pids["node-c"]))
        pid_file = os.path.join(state, "dftracer_server_node-c.pid")
        assert os.path.exists(pid_file)
        r = nodes["node-c"].on(SVC, "status", state, check=False)
        assert r.returncode == 3 and "stale PID file" in r.stdout, r.stdout
        # Worse, by the next start the pid was reused by an unrelated process (here the node's
        # own `sleep`): `start` must neither take it for the service nor signal it.
        with open(pid_file, "w") as f:
            f.write(f"{nodes['node-c'].proc.pid}\n")
        r = nodes["node-c"].on(SVC, "start", state, env=env)
        assert "removed stale PID file" in r.stdout, r.stdout
        assert alive(nodes["node-c"].proc.pid), "start signalled the process a stale PID file named"
        with open(pid_file) as f:
            new_c = int(f.read())
        daemons.append(new_c)
        assert new_c != pids["node-c"] and alive(new_c)
        # The dead daemon's file is kept; the new one gets a fresh name.
        assert os.path.exists(os.path.join(out, "node_node-c-1.pfw.gz"))

        for n in ("node-a", "node-c"):
            nodes[n].on(SVC, "stop", state)
        for name, host in (("node_node-a.pfw.gz", "node-a"), ("node_node-c-1.pfw.gz", "node-c")):
            assert traces.host_of(traces.complete(os.path.join(out, name))) == host
        assert glob.glob(os.path.join(state, "*.pid")) == []
        assert not [p for p in daemons if alive(p)]
    finally:
        for p in daemons:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        for node in nodes.values():
            node.close()


# --------------------------------------------------------------- MPI

def mpich_abi_dir():
    """The mpi4py wheel's MPICH build loads libmpi.so.12 (the MPICH ABI name); Debian names
    that library libmpich.so.12. A directory with the one link, on LD_LIBRARY_PATH."""
    d = os.path.join(WORK, "mpich-abi")
    os.makedirs(d, exist_ok=True)
    lib = glob.glob("/usr/lib/*/libmpich.so.12")[0]
    link = os.path.join(d, "libmpi.so.12")
    if not os.path.islink(link):
        os.symlink(lib, link)
    return d


def mpi(flavour):
    """(mpirun command, environment) for a flavour."""
    if flavour == "openmpi":
        # Root needs --allow-run-as-root (or these two); 4 ranks on 2 cores need oversubscribe.
        return ["mpirun.openmpi"], {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                                    "OMPI_MCA_rmaps_base_oversubscribe": "1", "MPI4PY_MPIABI": "openmpi"}
    return ["mpirun.mpich"], {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": mpich_abi_dir()}


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_mpirun_np4_writes_four_complete_traces_with_their_rank(flavour):
    d = fresh(f"mpi-{flavour}")
    mpirun, extra = mpi(flavour)
    env = trace_env(d, **extra)
    run([*mpirun, "-np", "4", PY, APP, "--mpi", "--out", d], env=env, timeout=180)
    ranks, done = traces.check_app_traces(os.path.join(d, "traces"), d, 4)
    assert {x["job_write_bytes"] for x in done.values()} == {sum(x["write_bytes"] for x in done.values())}
    assert len({x["pid"] for x in done.values()}) == 4
    assert ours_left(d) == []


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_example_mpirun_branch_runs_the_service_around_the_job(flavour):
    d = fresh(f"example-mpirun-{flavour}")
    mpirun, extra = mpi(flavour)
    env = trace_env(d, LAUNCHER="mpirun", MPIRUN=mpirun[0], NODES="1", RUN_DIR=d, SVC=SVC, **extra)
    del env["DFTRACER_LOG_FILE"]  # the example's default: <RUN_DIR>/traces/app
    r = run(["bash", EXAMPLE, "-np", "4", PY, APP, "--mpi", "--out", d], env=env, timeout=180)
    host = socket.gethostname()
    assert re.search(rf"stopped on {re.escape(host)} \(PID \d+\); trace .* complete", r.stdout), r.stdout
    recs = traces.complete(os.path.join(d, "traces", f"node_{host}.pfw.gz"))
    assert sum(1 for x in recs if x.get("ph") == 2) > 0
    traces.check_app_traces(os.path.join(d, "traces"), d, 4)
    assert glob.glob(os.path.join(d, "state", "*.pid")) == []
    assert ours_left(d) == []


# --------------------------------------------------------------- Slurm

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and one slurmd per node name, each slurmd in its own UTS namespace
    (hostname = node name), all on 127.0.0.1 with a port each; everything under `d`."""

    NODES = ("n1", "n2")

    def __init__(self, d):
        self.d, self.procs = d, []
        m = os.path.join(d, "munge")
        os.makedirs(m, mode=0o711)
        os.chmod(m, 0o711)  # munged refuses a socket directory others can write to
        run(["mungekey", "--create", "--keyfile", os.path.join(m, "munge.key")])
        self.sock = os.path.join(m, "munge.sock")
        self.start(["munged", "--foreground", "--force", f"--socket={self.sock}",
                    f"--key-file={m}/munge.key", f"--log-file={m}/munged.log",
                    f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed"], "munged")
        wait_for("munged", lambda: os.path.exists(self.sock), 10)
        self.conf = os.path.join(d, "slurm.conf")
        ports = [free_port() for _ in range(1 + len(self.NODES))]
        nodes = "\n".join(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=2 RealMemory=1000 State=UNKNOWN"
            for n, p in zip(self.NODES, ports[1:]))
        for sub in ("ctld", "spool"):
            os.makedirs(os.path.join(d, sub))
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=dftmulti
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.sock}
CredType=cred/munge
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
# No cgroups: processes are tracked through /proc (proctrack/linuxproc), tasks not bound.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# scancel: SIGTERM, then SIGKILL after KillWait seconds
KillWait=10
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.start(["slurmctld", "-D", "-i", "-f", self.conf], "slurmctld")
        wait_for("slurmctld", lambda: run(["scontrol", "ping"], env=self.env, check=False).stdout.count("UP"), 30)
        for n in self.NODES:
            self.start(["unshare", "--uts", "--", "sh", "-c", f"hostname {n} && exec slurmd -D -N {n} -f {self.conf}"],
                       f"slurmd {n}")
        wait_for("both nodes idle", lambda: run(["sinfo", "-h", "-o", "%T %D"], env=self.env, check=False)
                 .stdout.split() == ["idle", str(len(self.NODES))], 60)

    def start(self, cmd, what):
        log = open(os.path.join(self.d, what.replace(" ", "-") + ".stderr"), "w")
        self.procs.append((subprocess.Popen(cmd, env=dict(os.environ, SLURM_CONF=os.path.join(self.d, "slurm.conf")),
                                            stdout=log, stderr=log), what))

    def sbatch(self, script, d, *args, wait=True, timeout=240):
        path = os.path.join(d, "job.sh")
        with open(path, "w") as f:
            f.write("#!/bin/bash\nset -euo pipefail\n" + script)
        out = os.path.join(d, "job.out")
        cmd = ["sbatch", "--parsable", "-N", str(len(self.NODES)), "-o", out, "-D", d, *args, path]
        if wait:
            r = run(["sbatch", "--wait", *cmd[1:]], env=self.job_env(d), check=False, timeout=timeout)
            return r, open(out).read() if os.path.exists(out) else ""
        return run(cmd, env=self.job_env(d)).stdout.strip().split(";")[0]

    def job_env(self, d):
        return trace_env(d, SLURM_CONF=self.conf, SVC=SVC, RUN_DIR=d, PATH=f"{os.path.dirname(PY)}:{os.environ['PATH']}")

    def jobs(self):
        return run(["squeue", "-h", "-o", "%i"], env=self.env, check=False).stdout.split()

    def close(self):
        for j in self.jobs():
            run(["scancel", j], env=self.env, check=False)
        try:
            wait_for("no job left", lambda: not self.jobs(), 30)
        except AssertionError:
            pass
        for p, _ in reversed(self.procs):
            p.terminate()
        for p, what in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(fresh("slurm"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def srun_job(cluster):
    """examples/multinode_service.sh's srun branch in an sbatch job of two nodes."""
    d = fresh("example-srun")
    r, out = cluster.sbatch(f"{EXAMPLE} {PY} {APP} --out {d}\n", d, "--export=ALL")
    return d, r, out


def test_srun_example_runs_one_service_per_node_and_the_job(srun_job):
    d, r, out = srun_job
    assert r.returncode == 0, f"sbatch --wait exited {r.returncode}: {r.stderr}\njob output:\n{out}"
    for n in Cluster.NODES:
        assert re.search(rf"stopped on {n} \(PID \d+\); trace.* complete", out), out
        recs = traces.complete(os.path.join(d, "traces", f"node_{n}.pfw.gz"))
        assert traces.host_of(recs) == n
        assert sum(1 for x in recs if x.get("ph") == 2) > 0
        # The service is not a rank of the job, though srun gave it a SLURM_PROCID.
        assert "rank" not in traces.end_args(recs).get("app", {})
    ranks, done = traces.check_app_traces(os.path.join(d, "traces"), d, 2)
    assert sorted(x["host"] for x in done.values()) == list(Cluster.NODES)
    assert glob.glob(os.path.join(d, "state", "*.pid")) == []
    assert ours_left(d) == []


def test_srun_stop_returns_only_once_every_daemon_is_gone(cluster):
    d = fresh("srun-stop")
    st = os.path.join(d, "state")
    # In the stop step, on each node: the daemon's pid (its PID file), `stop`, then at once
    # whether /proc still has it.
    script = f"""
srun --overlap -N2 --ntasks-per-node=1 env DFTRACER_LOG_FILE={d}/traces/node {SVC} run {st} &
for _ in $(seq 1 300); do [ "$(ls {st}/*.pid 2>/dev/null | wc -l)" = 2 ] && break; sleep 0.1; done
srun --overlap -N2 --ntasks-per-node=1 sh -c '
  pid=$(cat {st}/dftracer_server_$(hostname -s).pid)
  {SVC} stop {st}; rc=$?
  if [ -e /proc/$pid ]; then echo "ALIVE $(hostname) $pid: $(cat /proc/$pid/stat)"; else echo "GONE $(hostname) $pid"; fi
  exit $rc'
wait
"""
    r, out = cluster.sbatch(script, d)
    assert r.returncode == 0, out
    for n in Cluster.NODES:
        assert re.search(rf"^GONE {n} \d+$", out, re.M), out
        traces.complete(os.path.join(d, "traces", f"node_{n}.pfw.gz"))
    assert "ALIVE" not in out, out
    assert ours_left(d) == []


def test_scancel_leaves_complete_traces_and_nothing_running(cluster):
    d = fresh("scancel")
    job = cluster.sbatch(f"{EXAMPLE} {PY} {APP} --out {d} --seconds 120\n", d, "--export=ALL", wait=False)
    t = os.path.join(d, "traces")
    # Running: both services and both ranks have written their files.
    wait_for("the job's traces", lambda: len(glob.glob(os.path.join(t, "node_*.pfw.gz"))) == 2
             and len(traces.app_files(t)) == 2, 90)
    time.sleep(1.5)  # a few steps and service samples
    run(["scancel", job], env=cluster.env)
    t0 = time.time()
    wait_for("the job to end", lambda: job not in cluster.jobs(), 60)
    ended = time.time() - t0
    for n in Cluster.NODES:
        assert traces.host_of(traces.complete(os.path.join(t, f"node_{n}.pfw.gz"))) == n
    ranks = set()
    for f in traces.app_files(t):
        recs = traces.complete(f)  # the SIGTERM Slurm sent was turned into a complete trace
        ranks.add(traces.end_args(recs)["app"]["rank"])
        assert any(x.get("name") == "step" and x.get("ph") == 1 for x in recs), f
    assert ranks == {0, 1}
    assert traces.did(d) == {}, "the job was to be cancelled before it finished"
    assert ours_left(d) == []
    # SIGTERM was enough: nothing waited for KillWait's SIGKILL (10 s).
    assert ended < 10, f"the job took {ended:.1f} s to end after scancel"


def test_readers_give_per_host_and_per_rank_numbers(srun_job):
    """dftracer-utils 0.0.14 (dftracer_view, dftracer_stats) and dfanalyzer over the whole
    directory of the two-node srun job (two service traces, two ranks' traces): the numbers per
    host and per rank are what each process did."""
    d, r, _ = srun_job
    assert r.returncode == 0
    t = os.path.join(d, "traces")
    done = traces.did(d)
    want = {(x["host"], x["rank"]): x for x in done.values()}
    utils = os.path.join(ROOT, ".venv-utils", "bin")
    idx = os.path.join(d, "index")  # the readers' indexes, outside the trace directory

    def view(*args):
        out = run([os.path.join(utils, "dftracer_view"), "--index-dir", idx, *args]).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    # Host and rank of every process, from the HH records and end.args.app.rank.
    procs = {int(x["pid"]): (x["host_name"], x["args.app.rank"])
             for x in view("-d", t, "--query", 'name == "end"', "--group-by", "host_name,pid,args.app.rank",
                           "--agg", "count")}
    ranks = {pid: (h, int(rk)) for pid, (h, rk) in procs.items() if rk is not None}
    assert ranks == {pid: (x["host"], x["rank"]) for pid, x in done.items()}
    services = {pid: h for pid, (h, rk) in procs.items() if rk is None}
    assert sorted(services.values()) == list(Cluster.NODES)

    # --merge: one trace of the whole job; per host and rank, its reads and writes.
    merged = os.path.join(d, "merged.pfw.gz")
    view("-d", t, "--merge", "-o", merged)
    io = view("--files", merged, "--query", 'cat == "POSIX" and (name == "write" or name == "read")',
              "--group-by", "pid,name", "--agg", "count,sum:ret")
    got = {(ranks[int(x["pid"])], x["name"]): (x["count"], x["sum_ret"]) for x in io}
    assert got == {((h, rk), op): (x[op + "s"], x[op + "_bytes"]) for (h, rk), x in want.items() for op in ("write", "read")}

    # dftracer_stats: per file, events grouped by host hash and pid.
    hh = {}
    for f in glob.glob(os.path.join(t, "*.pfw.gz")):
        for rec in traces.records(f):
            if rec.get("name") == "HH":
                hh[rec["args"]["value"]] = rec["args"]["name"]
    out = run([os.path.join(utils, "dftracer_stats"), "-d", t, "--index-dir", idx, "--report", "detailed",
               "--group-by", "hhash", "pid", "name", "--filter-cats", "POSIX", "--json"]).stdout
    counts = {}
    for f in json.loads(out[out.index("["):]):
        for key, v in f["detailed"].get("grouped_duration", {}).items():
            h, pid, name = key.split("|")
            if name in ("write", "read"):
                counts[(hh[h], ranks[int(pid)][1], name)] = v["count"]
    assert counts == {(h, rk, op): x[op + "s"] for (h, rk), x in want.items() for op in ("write", "read")}

    # dfanalyzer: the job's nodes, processes (two services, two ranks), POSIX calls and bytes.
    dfa = os.path.join(ROOT, ".venv-dfa", "bin", "dfanalyzer")
    res = run([dfa, f"trace_path={t}", "analyzer/preset=posix", "cluster.n_workers=1",
               f"hydra.run.dir={os.path.join(d, 'dfa')}"], env=dict(os.environ, USER=os.environ.get("USER", "root")),
              timeout=300)
    table = dict(re.findall(r"│ (\S[^│]*?) +│ [^│]+│ +([0-9.]+) │", res.stdout))
    posix = sum(1 for f in traces.app_files(t) for x in traces.records(f) if x.get("cat") == "POSIX" and x.get("ph") == 1)
    size = sum(x["write_bytes"] + x["read_bytes"] for x in done.values())
    assert table.get("Total Nodes") == "2", res.stdout
    assert table.get("Total Processes") == "4", res.stdout
    assert table.get("POSIX - All Count") == str(posix), res.stdout
    assert table.get("POSIX - All Size") == "%.3f" % (size / 2**20), res.stdout
