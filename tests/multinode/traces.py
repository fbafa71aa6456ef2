"""Reading the real trace files of tests/multinode: records, the end record, I/O per file."""
import glob
import gzip
import json
import os


def records(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def complete(path):
    """The file's records, asserting that it is a complete trace: `end` is its last record."""
    recs = records(path)
    assert recs, f"{path} is empty"
    last = recs[-1]
    assert last.get("name") == "end" and last.get("cat") == "dftracer", f"{path} does not end with `end`: {last}"
    return recs


def end_args(recs):
    return recs[-1].get("args", {})


def host_of(recs):
    """The hostname the HH record names."""
    for r in recs:
        if r.get("ph") == 4 and r.get("name") == "HH":
            return r["args"]["name"]
    raise AssertionError("no HH record")


def io_on(recs, path):
    """{'write': (calls, bytes), 'read': (calls, bytes)} of the POSIX events on `path`."""
    hashes = {r["args"]["value"] for r in recs if r.get("name") == "FH" and r["args"].get("name") == path}
    out = {"write": [0, 0], "read": [0, 0]}
    for r in recs:
        a = r.get("args", {})
        if r.get("ph") == 1 and r.get("cat") == "POSIX" and r.get("name") in out and a.get("fhash") in hashes:
            out[r["name"]][0] += 1
            out[r["name"]][1] += a.get("ret", 0)
    return {k: tuple(v) for k, v in out.items()}


def app_files(d):
    return sorted(glob.glob(os.path.join(d, "*-app.pfw.gz")))


def did(d):
    """What each process of app.py says it did, keyed by pid."""
    out = {}
    for f in glob.glob(os.path.join(d, "did_*.json")):
        with open(f) as fh:
            x = json.load(fh)
        out[x["pid"]] = x
    return out


def check_app_traces(trace_dir, did_dir, n):
    """The n app traces of a job: complete, names distinct, one per process that ran, the
    rank of each recorded as end.args.app.rank equal to the program's own rank, the host
    in HH equal to the program's, and its I/O on its file equal to what it did."""
    files = app_files(trace_dir)
    assert len(files) == n, f"{len(files)} app traces, want {n}: {files}"
    assert len({os.path.basename(f) for f in files}) == n
    done = did(did_dir)
    assert len(done) == n, f"{len(done)} processes reported, want {n}"
    seen = {}
    for f in files:
        recs = complete(f)
        pid = recs[-1]["pid"]
        assert pid in done, f"{f}: pid {pid} is none of the processes that ran {sorted(done)}"
        me = done[pid]
        app = end_args(recs).get("app", {})
        assert app.get("rank") == me["rank"], f"{f}: app.rank {app.get('rank')} but the process is rank {me['rank']}"
        assert host_of(recs) == me["host"], f"{f}: HH {host_of(recs)} but the process ran on {me['host']}"
        io = io_on(recs, me["path"])
        assert io["write"] == (me["writes"], me["write_bytes"]), f"{f}: writes {io['write']} vs did {me}"
        assert io["read"] == (me["reads"], me["read_bytes"]), f"{f}: reads {io['read']} vs did {me}"
        seen[me["rank"]] = f
    assert sorted(seen) == list(range(n)), f"ranks {sorted(seen)}"
    return seen, done
