//! Programs built against the reference DFTracer 2.2.0 run unchanged on this library, and
//! the reference's public headers that we ship behave as the reference's do.
//!
//! The reference wheel is fetched by the test itself (`pip download --no-deps
//! dftracer==2.2.0`, the cp311 manylinux_2_28 x86_64 wheel, whatever Python runs the test)
//! into `target/ref-wheel/` and unpacked there once. When the registry cannot be reached the
//! tests that need it say so on stderr and skip that part; any other failure fails them.
//!
//! C and C++ programs are compiled against the REFERENCE's header (`dftracer/include`) and
//! linked against the REFERENCE's `lib64/libdftracer_core.so` (SONAME
//! `libdftracer_core.so.4.3.0`, so the programs need that name), then run with
//! `LD_LIBRARY_PATH` naming a directory that holds only OUR library under the names the
//! programs need (read from their `DT_NEEDED`). The trace files our library wrote are read
//! back and checked.
//!
//! The reference's `enumeration.h` (included by its C++ header) includes
//! `<cpp-logger/logger.h>`, which the wheel does not ship: the test writes a stand-in with
//! only what `enumeration.h` uses (`uint8_t`, `std::string`, `cpplogger::LoggerType`) into
//! the scratch directory and adds it to the C++ include path. Nothing of it reaches the
//! binary (no cpp-logger function is called).

mod common;

use common::reference::reference;
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const SONAME: &str = "libdftracer_core.so.4.3.0";

/// Our include directory (the source tree's, as installed by scripts/native-lib.sh).
fn our_include() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The stand-in for `<cpp-logger/logger.h>` (see the module doc), in `s/stub`.
fn logger_stub(s: &Scratch) -> PathBuf {
    let dir = s.path("stub");
    std::fs::create_dir_all(dir.join("cpp-logger")).unwrap();
    std::fs::write(
        dir.join("cpp-logger/logger.h"),
        "// Test stand-in: only what dftracer/core/common/enumeration.h uses.\n\
         #pragma once\n#include <stdint.h>\n#include <string>\n\
         namespace cpplogger {\nenum LoggerType { CPP_LOGGER_NONE, CPP_LOGGER_ERROR, \
         CPP_LOGGER_WARN, CPP_LOGGER_INFO, CPP_LOGGER_DEBUG };\n}\n",
    )
    .unwrap();
    dir
}

fn compile(compiler: &str, args: &[&str], src: &Path, exe: &Path, tail: &[String]) {
    let out = Command::new(compiler)
        .args(args)
        .arg(src)
        .arg("-o")
        .arg(exe)
        .args(tail)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{compiler} {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `DT_NEEDED` entries of `exe`.
fn needed(exe: &Path) -> Vec<String> {
    let d = ok(Command::new("readelf").arg("-d").arg(exe).output().unwrap());
    d.lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_string()))
        .collect()
}

/// Builds `src` against the reference (header, `lib64/libdftracer_core.so`); returns the
/// program and a directory holding OUR library under every `libdftracer*` name it needs.
fn build_on_reference(s: &Scratch, r: &Path, compiler: &str, std: &str, src: &str) -> PathBuf {
    let ext = if compiler == "gcc" { "c" } else { "cpp" };
    let file = s.path(&format!("prog_{ext}.{ext}"));
    std::fs::write(&file, src).unwrap();
    let exe = s.path(&format!("prog_{ext}"));
    let inc = format!("-I{}", r.join("dftracer/include").display());
    let stub = format!("-I{}", logger_stub(s).display());
    let lib64 = r.join("dftracer/lib64");
    compile(
        compiler,
        &[&format!("-std={std}"), "-O1", &stub, &inc],
        &file,
        &exe,
        &[format!("-L{}", lib64.display()), "-ldftracer_core".into()],
    );
    // Linked against the reference: it needs the reference's SONAME.
    let n = needed(&exe);
    let ours: Vec<&String> = n.iter().filter(|l| l.starts_with("libdftracer")).collect();
    assert_eq!(ours, vec![SONAME], "DT_NEEDED of {}: {n:?}", exe.display());
    let dir = s.path("ours");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ours {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(lib(), &link).unwrap();
        }
    }
    exe
}

/// Runs `exe DATA_DIR` on our library (only `LD_LIBRARY_PATH=ours/`), tracing to `o/`.
fn run_on_ours(s: &Scratch, exe: &Path) -> String {
    let out = Command::new(exe)
        .current_dir(&s.dir)
        .arg(s.path("data"))
        .env("LD_LIBRARY_PATH", s.path("ours"))
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_INIT")
        .env_remove("DFTRACER_DATA_DIR")
        .env_remove("DFTRACER_CONFIGURATION")
        .env_remove("DFTRACER_INC_METADATA")
        .output()
        .unwrap();
    ok(out)
}

fn complete<'a>(t: &'a Trace, name: &str) -> Vec<&'a J> {
    t.lines
        .iter()
        .filter(|l| l["ph"] == 1 && l["name"] == name)
        .collect()
}

/// The only event named `name`.
fn one<'a>(t: &'a Trace, name: &str) -> &'a J {
    let v = complete(t, name);
    assert_eq!(v.len(), 1, "{name}: {v:?}");
    v[0]
}

fn by_layer(t: &Trace, layer: u64) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in t
        .lines
        .iter()
        .filter(|l| l["ph"] == 1 && l["type"] == layer)
    {
        *m.entry(l["name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    m
}

fn counts(v: &[(&str, usize)]) -> BTreeMap<String, usize> {
    v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// What both programs share: the trace is ours, one CM record, the end record's app
/// metadata and layers, POSIX events exactly on the one data file, every I/O event inside
/// the `work` region, ids without gaps.
fn check_shared(t: &Trace, s: &Scratch, layer: u64, used: &str, file: &str, blocks: usize) {
    let start = t.lines.iter().find(|l| l["name"] == "start").unwrap();
    assert!(
        start["args"]["implementation"]
            .as_str()
            .unwrap()
            .starts_with("dftracer-rs"),
        "{start}"
    );
    let cm: Vec<&J> = t
        .lines
        .iter()
        .filter(|l| l["ph"] == 4 && l["name"] == "CM" && l["type"] == layer)
        .collect();
    assert_eq!(cm.len(), 1, "{cm:?}");
    assert_eq!(cm[0]["args"]["name"], "app_version");
    assert_eq!(cm[0]["args"]["value"], "2.2.0");
    let end = t.lines.iter().find(|l| l["name"] == "end").unwrap();
    assert_eq!(end["args"]["app"]["workload"], "ref");
    assert_eq!(end["args"]["app"]["files"], 1);
    assert_eq!(end["args"]["used"][used], 1, "{end}");
    assert_eq!(end["args"]["used"]["REF"], 1, "{end}");
    assert_eq!(end["args"]["used"]["LIBC_IO"], 1, "{end}");
    // save: open, `blocks` writes, close; load: open, `blocks` reads + the one at EOF, close.
    let io: Vec<&J> = t.io();
    let mut names = BTreeMap::new();
    for e in &io {
        assert_eq!(e["cat"], "POSIX", "{e}");
        assert_eq!(t.file_of(e), s.path("data").join(file).to_string_lossy());
        *names
            .entry(e["name"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(
        names,
        counts(&[
            ("close", 2),
            ("open", 2),
            ("read", blocks + 1),
            ("write", blocks)
        ])
    );
    let written: i64 = io
        .iter()
        .filter(|e| e["name"] == "write")
        .map(|e| e["args"]["ret"].as_i64().unwrap())
        .sum();
    assert_eq!(written, 4096 * blocks as i64);
    let w = one(t, "work");
    let (t0, t1) = (
        w["ts"].as_u64().unwrap(),
        w["ts"].as_u64().unwrap() + w["dur"].as_u64().unwrap(),
    );
    for e in &io {
        let ts = e["ts"].as_u64().unwrap();
        assert!(t0 <= ts && ts <= t1, "{e} outside work [{t0}, {t1}]");
    }
    let ids: Vec<u64> = t.lines.iter().filter_map(|l| l["id"].as_u64()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
}

// ---------------------------------------------------------------- the programs

/// A C program written for the reference (its macros, as its header defines them).
const REF_C: &str = r#"
#include <dftracer/dftracer.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int save(const char *path, int blocks) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_STR("comp", "io");
  DFTRACER_C_FUNCTION_UPDATE_INT("blocks", blocks);
  char buf[4096];
  memset(buf, 'x', sizeof buf);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  int i, rc = fd < 0;
  for (i = 0; fd >= 0 && i < blocks; i++)
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) rc = 1;
  if (fd >= 0) close(fd);
  DFTRACER_C_FUNCTION_END();
  return rc;
}

static long load(const char *path) {
  DFTRACER_C_FUNCTION_START(); /* ended by the cleanup attribute */
  DFTRACER_C_FUNCTION_UPDATE_INT_TYPE("kind", 1, 1);
  DFTRACER_C_FUNCTION_UPDATE_STR_TYPE("mode", "seq", 0);
  char buf[4096];
  long total = 0;
  ssize_t n;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
  close(fd);
  return total;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  char path[4096];
  DFTRACER_C_INIT(NULL, dir, NULL);
  DFTRACER_C_APP_METADATA_STR("workload", "ref");
  DFTRACER_C_APP_METADATA_INT("files", 1);
  DFTRACER_C_MARK_USED("REF");
  DFTRACER_C_METADATA(v, "app_version", "2.2.0");
  DFTRACER_C_REGION_START(work);
  snprintf(path, sizeof path, "%s/c.bin", dir);
  int rc = save(path, 3);
  long n = load(path);
  DFTRACER_C_REGION_UPDATE_INT(work, "bytes", (int)n);
  DFTRACER_C_REGION_UPDATE_STR(work, "file", "c.bin");
  DFTRACER_C_REGION_UPDATE_INT_TYPE(work, "rc", rc, 2);
  DFTRACER_C_REGION_END(work);
  DFTRACER_C_FINI();
  printf("rc=%d bytes=%ld\n", rc, n);
  return 0;
}
"#;

/// The other way round: the same C program built with OUR header and library runs on the
/// reference's library (`LD_LIBRARY_PATH` naming its `lib64`, every symbol bound at load:
/// `LD_BIND_NOW=1`). Our header's additions (the inline off check's `dftracer_gate_`,
/// `dftracer_scope_begin`) are weak references, so the program falls back to the reference's
/// functions, and the reference records the same regions.
#[test]
fn our_header_c_program_runs_on_the_reference_library() {
    let Some(r) = reference() else { return };
    let s = Scratch::new("refabi-reverse");
    let file = s.path("prog.c");
    std::fs::write(&file, REF_C).unwrap();
    let exe = s.path("prog");
    let ours = s.path("ours");
    std::fs::create_dir_all(&ours).unwrap();
    for name in ["libdftracer_core.so", SONAME] {
        std::os::unix::fs::symlink(lib(), ours.join(name)).unwrap();
    }
    compile(
        "gcc",
        &["-std=c99", "-O1", &format!("-I{}", our_include().display())],
        &file,
        &exe,
        &[format!("-L{}", ours.display()), "-ldftracer_core".into()],
    );
    let out = Command::new(&exe)
        .current_dir(&s.dir)
        .arg(s.path("data"))
        .env("LD_LIBRARY_PATH", r.join("dftracer/lib64"))
        .env("LD_BIND_NOW", "1")
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_INC_METADATA", "1")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_INIT")
        .env_remove("DFTRACER_DATA_DIR")
        .env_remove("DFTRACER_CONFIGURATION")
        .output()
        .unwrap();
    assert_eq!(ok(out), "rc=0 bytes=12288\n");
    let files = s.traces();
    assert_eq!(files.len(), 1, "{files:?}");
    let t = Trace::read(&files[0]);
    assert_eq!(
        by_layer(&t, 2),
        counts(&[("load", 1), ("save", 1), ("work", 1)])
    );
    let a = &one(&t, "save")["args"];
    assert_eq!((&a["comp"], &a["blocks"]), (&J::from("io"), &J::from(3)));
}

/// A C++ program written for the reference: its macros (stack, heap and scoped
/// `DFTracer`s), a `DFTracer` of another layer ended early by `finalize()`, and one built in
/// a buffer between canaries, which must come out untouched (our functions write only
/// inside the reference's object layout).
const REF_CPP: &str = r#"
#include <dftracer/dftracer.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

static int save(const std::string &path, int blocks) {
  DFTRACER_CPP_FUNCTION();
  DFTRACER_CPP_FUNCTION_UPDATE("comp", "io");
  DFTRACER_CPP_FUNCTION_UPDATE("blocks", blocks);
  char buf[4096];
  std::memset(buf, 'y', sizeof buf);
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  int rc = fd < 0;
  for (int i = 0; fd >= 0 && i < blocks; i++)
    if (write(fd, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) rc = 1;
  if (fd >= 0) close(fd);
  return rc;
}

static long load(const std::string &path) {
  DFTRACER_CPP_FUNCTION();
  DFTRACER_CPP_FUNCTION_UPDATE_TYPE("kind", 1, MetadataType::MT_VALUE);
  DFTRACER_CPP_FUNCTION_UPDATE_TYPE("mode", "seq", MetadataType::MT_KEY);
  char buf[4096];
  long total = 0;
  ssize_t n;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
  close(fd);
  return total;
}

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  DFTRACER_CPP_INIT(nullptr, dir.c_str(), nullptr);
  DFTRACER_CPP_APP_METADATA_STR("workload", "ref");
  DFTRACER_CPP_APP_METADATA_INT("files", 1);
  DFTRACER_CPP_MARK_USED("REF");
  DFTRACER_CPP_METADATA(v, "app_version", "2.2.0");
  DFTRACER_CPP_REGION_START(work);
  int rc = save(dir + "/cpp.bin", 2);
  long n = load(dir + "/cpp.bin");
  DFTRACER_CPP_REGION_DYN_UPDATE(work, "bytes", static_cast<int>(n));
  DFTRACER_CPP_REGION_DYN_UPDATE_TYPE(work, "file", "cpp.bin", MetadataType::MT_IGNORE);
  {
    DFTRACER_CPP_REGION(scoped);
    DFTRACER_CPP_REGION_UPDATE(scoped, "step", 1);
    DFTRACER_CPP_REGION_UPDATE_TYPE(scoped, "phase", "a", MetadataType::MT_KEY);
  }
  {
    DFTracer early("early", "MYCAT", DF_DATA_EVENT, TraceEventType::TRACE_TYPE_PYTHON);
    early.update("x", 5);
    early.finalize();        // the event is recorded here
    early.update("late", 1); // after the end: ignored
    early.finalize();        // again: nothing
  }                          // the destructor: nothing
  alignas(16) unsigned char buf[sizeof(DFTracer) + 64];
  std::memset(buf, 0xAB, sizeof buf);
  DFTracer *g = new (buf + 32) DFTracer("guarded", CPP_LOG_CATEGORY, DF_DATA_EVENT);
  g->update("k", "v");
  g->~DFTracer();
  int canaries = 1;
  for (size_t i = 0; i < sizeof buf; i++)
    if ((i < 32 || i >= 32 + sizeof(DFTracer)) && buf[i] != 0xAB) canaries = 0;
  DFTRACER_CPP_REGION_END(work);
  DFTRACER_CPP_FINI();
  std::printf("rc=%d bytes=%ld sizeof=%zu canaries=%d\n", rc, n, sizeof(DFTracer), canaries);
  return 0;
}
"#;

#[test]
fn reference_built_c_program_runs_unchanged_on_ours() {
    let Some(r) = reference() else { return };
    let s = Scratch::new("refabi-c");
    let exe = build_on_reference(&s, r, "gcc", "c99", REF_C);
    assert_eq!(run_on_ours(&s, &exe), "rc=0 bytes=12288\n");
    let files = s.traces();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().ends_with("-app.pfw.gz"));
    let t = Trace::read(&files[0]);
    assert_eq!(
        by_layer(&t, 2),
        counts(&[("load", 1), ("save", 1), ("work", 1)])
    );
    for e in t.lines.iter().filter(|l| l["ph"] == 1 && l["type"] == 2) {
        assert_eq!(e["cat"], "C_APP", "{e}");
    }
    let a = &one(&t, "save")["args"];
    assert_eq!((&a["comp"], &a["blocks"]), (&J::from("io"), &J::from(3)));
    let a = &one(&t, "load")["args"];
    assert_eq!((&a["kind"], &a["mode"]), (&J::from(1), &J::from("seq")));
    let a = &one(&t, "work")["args"];
    assert_eq!(
        (&a["bytes"], &a["file"], &a["rc"]),
        (&J::from(12288), &J::from("c.bin"), &J::from(0))
    );
    check_shared(&t, &s, 2, "C_APP", "c.bin", 3);
}

#[test]
fn reference_built_cpp_program_runs_unchanged_on_ours() {
    let Some(r) = reference() else { return };
    let s = Scratch::new("refabi-cpp");
    let exe = build_on_reference(&s, r, "g++", "c++17", REF_CPP);
    // It calls the reference's out-of-line DFTracer members, which ours must provide.
    let undef = ok(Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(&exe)
        .output()
        .unwrap());
    for sym in [
        "_ZN8DFTracerC1EPKcS1_i14TraceEventType",
        "_ZN8DFTracer6updateEPKci12MetadataType",
        "_ZN8DFTracer6updateEPKcS1_12MetadataType",
        "_ZN8DFTracer8finalizeEv",
        "_ZN8DFTracerD1Ev",
    ] {
        assert!(undef.contains(sym), "{sym} not called:\n{undef}");
    }
    assert_eq!(
        run_on_ours(&s, &exe),
        "rc=0 bytes=8192 sizeof=48 canaries=1\n"
    );
    let files = s.traces();
    assert_eq!(files.len(), 1, "{files:?}");
    let t = Trace::read(&files[0]);
    assert_eq!(
        by_layer(&t, 9),
        counts(&[
            ("guarded", 1),
            ("load", 1),
            ("save", 1),
            ("scoped", 1),
            ("work", 1)
        ])
    );
    assert!(by_layer(&t, 2).is_empty(), "no C_APP events from C++");
    for e in t.lines.iter().filter(|l| l["ph"] == 1 && l["type"] == 9) {
        assert_eq!(e["cat"], "CPP_APP", "{e}");
    }
    let a = &one(&t, "save")["args"];
    assert_eq!((&a["comp"], &a["blocks"]), (&J::from("io"), &J::from(2)));
    let a = &one(&t, "load")["args"];
    assert_eq!((&a["kind"], &a["mode"]), (&J::from(1), &J::from("seq")));
    let a = &one(&t, "work")["args"];
    assert_eq!(
        (&a["bytes"], &a["file"]),
        (&J::from(8192), &J::from("cpp.bin"))
    );
    let a = &one(&t, "scoped")["args"];
    assert_eq!((&a["step"], &a["phase"]), (&J::from(1), &J::from("a")));
    assert_eq!(one(&t, "guarded")["args"]["k"], "v");
    // The layer and category given to the constructor; ended once, by finalize().
    let e = one(&t, "early");
    assert_eq!((&e["type"], &e["cat"]), (&J::from(6), &J::from("MYCAT")));
    assert_eq!(e["args"]["x"], 5);
    assert!(e["args"].get("late").is_none(), "{e}");
    check_shared(&t, &s, 9, "CPP_APP", "cpp.bin", 2);
}

// ---------------------------------------------------------------- the shipped headers

/// Prints every enum value, conversion, constant and type size of the reference's public
/// headers; compiled against ours and (when the wheel is at hand) the reference's.
const ENUMS: &str = r#"
#include <dftracer/core/common/constants.h>
#include <dftracer/core/common/typedef.h>
#include <dftracer/core/common/enumeration.h>
#include <cstdio>
#include <string>

#define P(x) std::printf("%s = %d\n", #x, static_cast<int>(x))
#define S(x) std::printf("%s = \"%s\"\n", #x, x)

int main() {
  for (int i = -2; i <= 16; i++) {
    TraceEventType t = TRACE_TYPE_CUDA;
    convert(i, t);
    std::printf("TraceEventType %d -> %d %s\n", i, static_cast<int>(t), to_string(t));
  }
  for (int i = -2; i <= 6; i++) {
    TracePhaseType p = TRACE_PHASE_METADATA;
    convert(i, p);
    std::printf("TracePhaseType %d -> %d %s\n", i, static_cast<int>(p), to_string(p));
  }
  for (int i = -2; i <= 4; i++) {
    MetadataType m = MT_IGNORE;
    convert(i, m);
    std::printf("MetadataType %d -> %d %d\n", i, static_cast<int>(convert(i)),
                static_cast<int>(m));
  }
  const char *words[] = {"PRELOAD", "FUNCTION", "", "preload", "FULL", "SELECTIVE",
                         "US", "NS", "MS", "SEC", "ns", "DEBUG", "INFO", "WARN", "ERROR"};
  for (const char *w : words) {
    ProfileInitType pi = PROFILER_INIT_FUNCTION;
    AggregationType a = AGGREGATION_TYPE_SELECTIVE;
    TimeMetricType tm = TIME_METRIC_SEC;
    convert(std::string(w), pi);
    convert(std::string(w), a);
    convert(std::string(w), tm);
    std::printf("'%s' -> init %d aggregation %d %s time %d %s %g\n", w, static_cast<int>(pi),
                static_cast<int>(a), to_string(a).c_str(), static_cast<int>(tm),
                to_string(tm).c_str(), time_metric_units_per_second(tm));
#ifdef WITH_LOGGER
    cpplogger::LoggerType l = cpplogger::CPP_LOGGER_NONE;
    convert(std::string(w), l);
    std::printf("'%s' -> logger %d\n", w, static_cast<int>(l));
#endif
  }
  P(TRACE_TYPE_MAX); P(TRACE_PHASE_MAX); P(CHROME);
  P(PROFILER_INIT); P(PROFILER_FINI); P(PROFILER_OTHER);
  P(PROFILER_PRELOAD); P(PROFILER_PY_APP); P(PROFILER_CPP_APP); P(PROFILER_C_APP);
  P(PROFILER_ANY); P(PROFILER_INIT_NONE); P(PROFILER_INIT_LD_PRELOAD);
  P(PROFILER_INIT_FUNCTION); P(VALUE_TYPE_NUMBER); P(VALUE_TYPE_STRING);
  P(MT_KEY); P(MT_VALUE); P(MT_IGNORE);
  P(AGGREGATION_TYPE_FULL); P(AGGREGATION_TYPE_SELECTIVE);
  P(TIME_METRIC_US); P(TIME_METRIC_NS); P(TIME_METRIC_MS); P(TIME_METRIC_SEC);
  P(RuleOp::AND); P(RuleOp::OR); P(RuleOp::NOT); P(RuleOp::EQ); P(RuleOp::NEQ);
  P(RuleOp::GT); P(RuleOp::LT); P(RuleOp::GTE); P(RuleOp::LTE); P(RuleOp::IN);
  P(RuleOp::LIKE);
  P(sizeof(TraceEventType)); P(sizeof(TracePhaseType)); P(sizeof(MetadataType));
  P(sizeof(ProfileType)); P(sizeof(TimeMetricType)); P(sizeof(AggregationType));
  P(sizeof(TimeResolution)); P(sizeof(ThreadID)); P(sizeof(ProcessID));
  P(sizeof(EventNameType)); P(sizeof(ConstEventNameType)); P(sizeof(HashType));
  P(EVENT_TYPE_SIZE); P(DFT_PATH_MAX); P(SEPARATOR); P(HASH_OUTPUT); P(NO_HASH_DEFAULT);
  P(DFTRACER_DATA_DIR_DELIMITER);
  S(DFTRACER_CONFIGURATION); S(DFTRACER_ENABLE); S(DFTRACER_GOTCHA_PRIORITY);
  S(DFTRACER_LOG_LEVEL); S(DFTRACER_TIME_METRIC); S(DFTRACER_LOG_FILE); S(DFTRACER_INIT);
  S(DFTRACER_INIT_COUNT); S(DFTRACER_DATA_DIR); S(DFTRACER_SET_CORE_AFFINITY);
  S(DFTRACER_ERROR); S(DFTRACER_INC_METADATA); S(DFTRACER_DISABLE_POSIX);
  S(DFTRACER_DISABLE_STDIO); S(DFTRACER_DISABLE_IO); S(DFTRACER_TRACE_COMPRESSION);
  S(DFTRACER_DISABLE_TIDS); S(DFTRACER_ENABLE_AGGREGATION); S(DFTRACER_AGGREGATION_TYPE);
  S(DFTRACER_AGGREGATION_FILE); S(DFTRACER_BIND_SIGNALS); S(DFTRACER_WRITE_BUFFER_SIZE);
  S(DFTRACER_TRACE_INTERVAL_MS); S(DFTRACER_LIBUV_THREADS); S(DFTRACER_ENABLE_PAPI_TRACING);
  S(DFTRACER_PAPI_EVENTS); S(DFTRACER_PAPI_MULTIPLEX); S(DFTRACER_PAPI_SAMPLE_INTERVAL_MS);
  S(DFTRACER_DISABLE_VARIORUM_POWER); S(DFTRACER_ALL_FILES); S(DFTRACER_AGGREGATOR_COUNT);
  S(METADATA_NAME_PROCESS); S(METADATA_NAME_PROCESS_NAME); S(METADATA_NAME_THREAD_NAME);
  S(METADATA_NAME_FILE_HASH); S(METADATA_NAME_HOSTNAME_HASH); S(METADATA_NAME_STRING_HASH);
  S(CUSTOM_METADATA);
  return 0;
}
"#;

/// Compiles and runs `ENUMS` with `flags`; its output.
fn enums_with(s: &Scratch, tag: &str, flags: &[String]) -> String {
    let src = s.path("enums.cpp");
    std::fs::write(&src, ENUMS).unwrap();
    let exe = s.path(&format!("enums-{tag}"));
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    compile("g++", &args, &src, &exe, &[]);
    ok(Command::new(&exe).output().unwrap())
}

#[test]
fn shipped_reference_headers_compile_against_ours_with_the_reference_values() {
    let s = Scratch::new("refabi-headers");
    let ours = format!("-I{}", our_include().display());
    // Warning-free in every C++ mode, alone and together with dftracer.h in either order.
    let both = [
        "#include <dftracer/core/common/enumeration.h>\n#include <dftracer/dftracer.h>\n",
        "#include <dftracer/dftracer.h>\n#include <dftracer/core/common/enumeration.h>\n\
         #include <dftracer/core/common/cpp_typedefs.h>\n",
    ];
    for (i, text) in both.iter().enumerate() {
        let f = s.path(&format!("both{i}.cpp"));
        std::fs::write(&f, text).unwrap();
        for std in ["c++11", "c++14", "c++17", "c++20"] {
            let out = Command::new("g++")
                .arg(format!("-std={std}"))
                .args(["-Wall", "-Wextra", "-Werror", "-Wshadow", "-fsyntax-only"])
                .arg(&ours)
                .arg(&f)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{std} {text}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // The C headers in C.
    let c = s.path("c.c");
    std::fs::write(
        &c,
        "#include <dftracer/core/common/constants.h>\n#include <dftracer/core/common/typedef.h>\n\
         int main(void) { TimeResolution t = 0; ConstEventNameType n = DFTRACER_LOG_FILE;\n\
         return (int)t + (n[0] != 'D') + (SEPARATOR != ';'); }\n",
    )
    .unwrap();
    for std in ["c99", "c11"] {
        let out = Command::new("gcc")
            .arg(format!("-std={std}"))
            .args(["-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
            .arg(&ours)
            .arg(&c)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let strict = |inc: &str| -> Vec<String> {
        ["-std=c++11", "-Wall", "-Wextra", "-Werror", inc]
            .iter()
            .map(|x| x.to_string())
            .collect()
    };
    let got = enums_with(&s, "ours", &strict(&ours));
    // Values checked here whether or not the reference is at hand.
    for line in [
        "TraceEventType -2 -> 0 UNKNOWN",
        "TraceEventType 2 -> 2 C_APP",
        "TraceEventType 9 -> 9 CPP_APP",
        "TraceEventType 10 -> 10 MPI",
        "TraceEventType 11 -> 11 PAPI",
        "TraceEventType 12 -> 12 OMNISTAT",
        "TraceEventType 13 -> 13 VARIORUM",
        "TraceEventType 14 -> 14 CUDA",
        "TraceEventType 15 -> 0 UNKNOWN",
        "TracePhaseType 1 -> 1 COMPLETE",
        "TracePhaseType 4 -> 4 METADATA",
        "TracePhaseType 5 -> 0 UNKNOWN",
        "MetadataType 2 -> 2 2",
        "MetadataType 3 -> 0 0",
        "'PRELOAD' -> init 1 aggregation 0 FULL time 0 US 1e+06",
        "'SELECTIVE' -> init 0 aggregation 1 SELECTIVE time 0 US 1e+06",
        "'NS' -> init 0 aggregation 0 FULL time 1 NS 1e+09",
        "'SEC' -> init 0 aggregation 0 FULL time 3 SEC 1",
        "TRACE_TYPE_MAX = 15",
        "TRACE_PHASE_MAX = 5",
        "RuleOp::LIKE = 10",
        "sizeof(TraceEventType) = 1",
        "sizeof(TimeResolution) = 8",
        "DFT_PATH_MAX = 4096",
        "DFTRACER_DATA_DIR_DELIMITER = 58",
        "DFTRACER_AGGREGATOR_COUNT = \"dft_cnt\"",
        "CUSTOM_METADATA = \"CM\"",
    ] {
        assert!(
            got.lines().any(|l| l == line),
            "missing {line:?} in:\n{got}"
        );
    }
    let Some(r) = reference() else { return };
    // The same program against the reference's headers prints the same (C++17: its
    // cpp_typedefs.h needs <any>); with the cpp-logger stand-in on both sides, the
    // LoggerType conversion too.
    let stub = format!("-I{}", logger_stub(&s).display());
    let theirs = format!("-I{}", r.join("dftracer/include").display());
    let flags = |inc: &str| -> Vec<String> {
        ["-std=c++17", "-DWITH_LOGGER", &stub, inc]
            .iter()
            .map(|x| x.to_string())
            .collect()
    };
    let ours_l = enums_with(&s, "ours-logger", &flags(&ours));
    let theirs_l = enums_with(&s, "theirs-logger", &flags(&theirs));
    assert!(ours_l.contains("'DEBUG' -> logger 4"), "{ours_l}");
    assert_eq!(ours_l, theirs_l);
    let without: String = ours_l
        .lines()
        .filter(|l| !l.contains("-> logger"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(without, got, "the logger lines are the only addition");
}
