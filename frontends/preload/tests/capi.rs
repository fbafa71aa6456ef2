//! End-to-end tests of the C/C++ API (`include/dftracer/dftracer.h`, `libdftracer_core.so`):
//! the header compiles alone in every language mode warning-free; the C and C++ examples
//! (`examples/c/`) build against the install layout of `scripts/native-lib.sh` through
//! pkg-config and CMake, run, and the trace files they really wrote are read back (every gzip
//! member, every JSON line) and checked event by event. A tool that is missing (clang, cmake,
//! pkg-config) skips its part with a printed reason; gcc and g++ are required.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// ---------------------------------------------------------------- harness

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn skip(what: &str, tool: &str) {
    eprintln!("SKIPPED {what}: `{tool}` is not installed");
}

/// The install layout (`scripts/native-lib.sh --prefix`) of this build's library, or, with
/// `DFT_INSTALL_PREFIX` set, a prefix `make install PREFIX=...` made (scripts/test.sh's
/// `install` step: the same tests against what a C/C++ user installs).
fn prefix() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        if let Some(p) = std::env::var_os("DFT_INSTALL_PREFIX") {
            return PathBuf::from(p);
        }
        let so = lib();
        let profile_dir = so.parent().unwrap();
        // Beside the build, one per test process; those of finished runs are removed.
        let parent = profile_dir.join("capi-test-prefix");
        for e in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let pid = e.file_name().to_string_lossy().into_owned();
            if !Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let dir = parent.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = Command::new("bash");
        c.arg(repo().join("scripts/native-lib.sh"))
            .args(["--no-build", "--prefix"])
            .arg(&dir)
            .arg("--target-dir")
            .arg(profile_dir.parent().unwrap());
        if profile_dir.file_name().unwrap() == "debug" {
            c.arg("--debug");
        }
        ok(c.output().unwrap());
        dir
    })
}

fn header_dir() -> PathBuf {
    repo().join("frontends/preload/include")
}

fn example(name: &str) -> PathBuf {
    repo().join("examples/c").join(name)
}

/// `pkg-config --cflags --libs dftracer` against the install layout.
fn pkg_config_flags() -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", "dftracer"])
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
        .output()
        .unwrap();
    ok(out).split_whitespace().map(String::from).collect()
}

/// Compiles and links `src` with `compiler` against the installed library (pkg-config when
/// present, else the layout's paths), warnings as errors.
fn build(s: &Scratch, compiler: &str, std: &str, src: &Path, exe: &str) -> PathBuf {
    let out = s.path(exe);
    let flags = if have("pkg-config") {
        pkg_config_flags()
    } else {
        skip("building through pkg-config (using -I/-L)", "pkg-config");
        vec![
            format!("-I{}", prefix().join("include").display()),
            format!("-L{}", prefix().join("lib").display()),
            "-ldftracer_core".into(),
        ]
    };
    let (cflags, libs): (Vec<_>, Vec<_>) = flags.into_iter().partition(|f| f.starts_with("-I"));
    let o = Command::new(compiler)
        .arg(format!("-std={std}"))
        .args(["-Wall", "-Wextra", "-Werror", "-O1"])
        .args(&cflags)
        .arg(src)
        .arg("-o")
        .arg(&out)
        .args(&libs)
        .arg(format!("-Wl,-rpath,{}", prefix().join("lib").display()))
        .output()
        .unwrap();
    ok(o);
    out
}

/// Runs `exe DATA_DIR [arg]` with tracing on, traces to `o/`, no preload. Programs run
/// without `LD_LIBRARY_PATH` (cargo test sets one naming target/<profile>): they find the
/// library through their RUNPATH, as installed programs do.
fn run(s: &Scratch, exe: &Path, args: &[&str]) -> String {
    let out = Command::new(exe)
        .current_dir(&s.dir)
        .arg(s.path("data"))
        .args(args)
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_INIT")
        .env_remove("DFTRACER_DATA_DIR")
        .env_remove("DFTRACER_CONFIGURATION")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("DFTRACER_INC_METADATA")
        .output()
        .unwrap();
    ok(out)
}

/// Complete events of `layer` (type), by name.
fn counts(t: &Trace, layer: u64) -> BTreeMap<String, usize> {
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

fn map(v: &[(&str, usize)]) -> BTreeMap<String, usize> {
    v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

fn events<'a>(t: &'a Trace, name: &str) -> Vec<&'a J> {
    t.lines
        .iter()
        .filter(|l| l["ph"] == 1 && l["name"] == name)
        .collect()
}

fn end(t: &Trace) -> &J {
    t.lines
        .iter()
        .find(|l| l["name"] == "end" && l["cat"] == "dftracer")
        .expect("end record")
}

/// I/O the examples do on the files of the data dir: a.bin (3 blocks written, read back in
/// 4 reads, then streamed once), b.bin (1 block, read back in 2 reads).
fn expected_io() -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let posix = map(&[("open", 4), ("write", 4), ("read", 6), ("close", 4)]);
    let stdio = map(&[("fopen", 1), ("fread", 1), ("fclose", 1)]);
    (posix, stdio)
}

fn posix_stdio(t: &Trace) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let mut p = BTreeMap::new();
    let mut s = BTreeMap::new();
    for l in t.lines.iter().filter(|l| l["ph"] == 1 && l["type"] == 3) {
        let m = match l["cat"].as_str().unwrap() {
            "POSIX" => &mut p,
            "STDIO" => &mut s,
            c => panic!("unexpected I/O category {c}"),
        };
        *m.entry(l["name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    (p, s)
}

/// The checks shared by every run of the C example: its regions, args, metadata and end.
fn check_c_trace(t: &Trace, bound: bool) {
    assert_eq!(
        counts(t, 2),
        map(&[
            ("read_file", 2),
            ("stream", 1),
            ("work", 1),
            ("write_file", 2)
        ]),
        "C_APP events of {}",
        t.path.display()
    );
    for e in t.lines.iter().filter(|l| l["ph"] == 1 && l["type"] == 2) {
        assert_eq!(e["cat"], "C_APP");
    }
    let data = t.path.parent().unwrap().parent().unwrap().join("data");
    let mut writes: Vec<(String, i64)> = events(t, "write_file")
        .iter()
        .map(|e| {
            (
                e["args"]["path"].as_str().unwrap().to_string(),
                e["args"]["blocks"].as_i64().unwrap(),
            )
        })
        .collect();
    writes.sort();
    let f = |n: &str| data.join(n).to_string_lossy().into_owned();
    assert_eq!(writes, vec![(f("a.bin"), 3), (f("b.bin"), 1)]);
    let mut reads: Vec<i64> = events(t, "read_file")
        .iter()
        .map(|e| e["args"]["bytes"].as_i64().unwrap())
        .collect();
    reads.sort();
    assert_eq!(reads, vec![4096, 3 * 4096]);
    assert!(events(t, "read_file")
        .iter()
        .all(|e| e["args"]["kind"] == "sequential"));
    let st = &events(t, "stream")[0]["args"];
    assert_eq!(
        (&st["bytes"], &st["mode"], &st["calls"]),
        (&J::from(1024), &J::from("r"), &J::from(1))
    );
    assert_eq!(events(t, "work")[0]["args"]["rc"], 0);
    check_common(t, 2, "io_app", "C_APP", bound);
}

fn check_cpp_trace(t: &Trace, bound: bool) {
    assert_eq!(
        counts(t, 9),
        map(&[("load", 2), ("main", 1), ("save", 2), ("stream", 1)]),
        "CPP_APP events of {}",
        t.path.display()
    );
    assert!(counts(t, 2).is_empty(), "no C_APP events from C++");
    for e in t.lines.iter().filter(|l| l["ph"] == 1 && l["type"] == 9) {
        assert_eq!(e["cat"], "CPP_APP");
    }
    let mut blocks: Vec<i64> = events(t, "save")
        .iter()
        .map(|e| {
            assert_eq!(e["args"]["comp"], "io");
            e["args"]["blocks"].as_i64().unwrap()
        })
        .collect();
    blocks.sort();
    assert_eq!(blocks, vec![1, 3]);
    let mut reads: Vec<i64> = events(t, "load")
        .iter()
        .map(|e| e["args"]["bytes"].as_i64().unwrap())
        .collect();
    reads.sort();
    assert_eq!(reads, vec![4096, 3 * 4096]);
    let st = &events(t, "stream")[0]["args"];
    assert_eq!((&st["bytes"], &st["mode"]), (&J::from(1024), &J::from("r")));
    let m = &events(t, "main")[0]["args"];
    assert_eq!((&m["ok"], &m["phase"]), (&J::from(1), &J::from("all")));
    check_common(t, 9, "io_app_cpp", "CPP_APP", bound);
}

/// Metadata event, app metadata, `used`, `bind`, and the I/O events (exact when bound, none
/// otherwise), each inside the main region's time span.
fn check_common(t: &Trace, layer: u64, workload: &str, used: &str, bound: bool) {
    let cm: Vec<&J> = t
        .lines
        .iter()
        .filter(|l| l["ph"] == 4 && l["name"] == "CM" && l["type"] == layer)
        .collect();
    assert_eq!(cm.len(), 1, "one metadata event");
    assert_eq!(
        (&cm[0]["args"]["name"], &cm[0]["args"]["value"]),
        (&J::from("app_version"), &J::from("1.0"))
    );
    let e = end(t);
    assert_eq!(e["args"]["app"]["workload"], workload);
    assert_eq!(e["args"]["app"]["files"], 2);
    assert_eq!(e["args"]["used"][used], 1);
    assert_eq!(e["args"]["used"]["EXAMPLE"], 1);
    assert_eq!(e["args"]["cfg"]["bind"], bound as u8);
    // mark_used of a layer that also recorded events is one key, not two.
    let raw = serde_json::to_string(e).unwrap();
    assert_eq!(raw.matches(&format!("\"{used}\":1")).count(), 1, "{raw}");
    let (posix, stdio) = posix_stdio(t);
    if bound {
        assert_eq!((posix, stdio), expected_io(), "{}", t.path.display());
        let region = if layer == 2 { "work" } else { "main" };
        let r = events(t, region)[0];
        let (t0, t1) = (
            r["ts"].as_u64().unwrap(),
            r["ts"].as_u64().unwrap() + r["dur"].as_u64().unwrap(),
        );
        for io in t.lines.iter().filter(|l| l["ph"] == 1 && l["type"] == 3) {
            let ts = io["ts"].as_u64().unwrap();
            assert!(t0 <= ts && ts <= t1, "{io} outside {region} [{t0}, {t1}]");
            assert!(t.file_of(io).contains("/data/"), "{io}");
        }
    } else {
        assert!(posix.is_empty() && stdio.is_empty(), "{posix:?} {stdio:?}");
    }
    // ids are 1..=n in file order: nothing recorded twice
    let ids: Vec<u64> = t.lines.iter().filter_map(|l| l["id"].as_u64()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
}

fn only_app_trace(s: &Scratch, suffix: &str) -> Trace {
    let files = s.traces();
    assert_eq!(files.len(), 1, "one trace file per process: {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("trace-") && name.ends_with(&format!("-{suffix}.pfw.gz")),
        "{name}"
    );
    Trace::read(&files[0])
}

// ---------------------------------------------------------------- header

const EVERY_C_MACRO_NO_SEMICOLONS: &str = r#"
#include <dftracer/dftracer.h>
#include <stddef.h>
/* The reference's macros end in ';', so code written for it may leave them out. */
static int f(int x) {
  DFTRACER_C_FUNCTION_START()
  DFTRACER_C_FUNCTION_UPDATE_INT("x", x)
  DFTRACER_C_FUNCTION_UPDATE_STR("s", "v")
  DFTRACER_C_FUNCTION_UPDATE_INT_TYPE("x2", x, 1)
  DFTRACER_C_FUNCTION_UPDATE_STR_TYPE("s2", "v", 2)
  DFTRACER_C_REGION_START(inner)
  DFTRACER_C_REGION_UPDATE_INT(inner, "a", 1)
  DFTRACER_C_REGION_UPDATE_STR(inner, "b", "c")
  DFTRACER_C_REGION_UPDATE_INT_TYPE(inner, "d", 1, 0)
  DFTRACER_C_REGION_UPDATE_STR_TYPE(inner, "e", "f", 0)
  DFTRACER_C_REGION_END(inner)
  DFTRACER_C_METADATA(m, "k", "v")
  DFTRACER_C_FUNCTION_END()
  return x;
}
int main(void) {
  DFTRACER_C_INIT(NULL, NULL, NULL)
  DFTRACER_C_APP_METADATA_INT("a", 1)
  DFTRACER_C_APP_METADATA_STR("b", "c")
  DFTRACER_C_MARK_USED("X")
  f(1);
  DFTRACER_C_FINI();
  DFTRACER_C_INIT_NO_BIND(NULL, NULL, NULL)
  return 0;
}
"#;

const EVERY_CPP_MACRO: &str = r#"
#include <dftracer/dftracer.h>
static int g(int x) {
  DFTRACER_CPP_FUNCTION()
  DFTRACER_CPP_FUNCTION_UPDATE("x", x)
  DFTRACER_CPP_FUNCTION_UPDATE_TYPE("y", "z", MT_VALUE)
  DFTRACER_CPP_REGION(r)
  DFTRACER_CPP_REGION_UPDATE(r, "a", 1)
  DFTRACER_CPP_REGION_UPDATE_TYPE(r, "b", "c", MetadataType::MT_IGNORE)
  DFTRACER_CPP_REGION_START(dyn)
  DFTRACER_CPP_REGION_DYN_UPDATE(dyn, "a", 1)
  DFTRACER_CPP_REGION_DYN_UPDATE_TYPE(dyn, "b", "c", MT_KEY)
  DFTRACER_CPP_REGION_END(dyn);
  DFTRACER_CPP_METADATA(m, "k", "v")
  DFTracer explicit_one("name", "cat", DF_DATA_EVENT, TraceEventType::TRACE_TYPE_C_APP);
  explicit_one.update("k", 1);
  explicit_one.finalize();
  return x;
}
int main() {
  DFTRACER_CPP_INIT(nullptr, nullptr, nullptr)
  DFTRACER_CPP_APP_METADATA_INT("a", 1)
  DFTRACER_CPP_APP_METADATA_STR("b", "c")
  DFTRACER_CPP_MARK_USED("X")
  g(1);
  DFTRACER_CPP_FINI();
  DFTRACER_CPP_INIT_NO_BIND(nullptr, nullptr, nullptr)
  return 0;
}
"#;

#[test]
fn header_compiles_alone_in_every_language_mode_warning_free() {
    let s = Scratch::new("capi-header");
    let alone_c = s.path("alone.c");
    std::fs::write(&alone_c, "#include <dftracer/dftracer.h>\n").unwrap();
    let alone_cpp = s.path("alone.cpp");
    std::fs::write(&alone_cpp, "#include <dftracer/dftracer.h>\n").unwrap();
    let macros_c = s.path("macros.c");
    std::fs::write(&macros_c, EVERY_C_MACRO_NO_SEMICOLONS).unwrap();
    let macros_cpp = s.path("macros.cpp");
    std::fs::write(&macros_cpp, EVERY_CPP_MACRO).unwrap();
    let (ex_c, ex_cpp) = (example("io_app.c"), example("io_app.cpp"));
    let mut jobs: Vec<(&str, &str, Vec<&Path>)> = Vec::new();
    let c_srcs = vec![alone_c.as_path(), macros_c.as_path(), ex_c.as_path()];
    let cpp_srcs = vec![alone_cpp.as_path(), macros_cpp.as_path(), ex_cpp.as_path()];
    let mut compilers = vec![("gcc", "g++")];
    if have("clang") && have("clang++") {
        compilers.push(("clang", "clang++"));
    } else {
        skip("compiling the header with clang", "clang");
    }
    for (cc, cxx) in &compilers {
        for std in ["c99", "c11", "c17"] {
            jobs.push((cc, std, c_srcs.clone()));
        }
        for std in ["c++11", "c++14", "c++17", "c++20"] {
            jobs.push((cxx, std, cpp_srcs.clone()));
        }
    }
    let mut n = 0;
    for (compiler, std, srcs) in jobs {
        for src in srcs {
            let out = Command::new(compiler)
                .arg(format!("-std={std}"))
                .args(["-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I"])
                .arg(header_dir())
                .arg(src)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{compiler} -std={std} {}:\n{}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
    }
    assert!(n >= 21);
}

// ---------------------------------------------------------------- examples

#[test]
fn c_example_records_its_regions_args_and_io_bound_and_not_bound() {
    let s = Scratch::new("capi-c");
    let exe = build(&s, "gcc", "c99", &example("io_app.c"), "io_app");
    let out = run(&s, &exe, &[]);
    assert_eq!(out, "wrote and read 16384 bytes, streamed 1024\n");
    check_c_trace(&only_app_trace(&s, "app"), true);

    let s = Scratch::new("capi-c-nobind");
    let out = run(&s, &exe, &["nobind"]);
    assert_eq!(out, "wrote and read 16384 bytes, streamed 1024\n");
    check_c_trace(&only_app_trace(&s, "app"), false);
}

#[test]
fn cpp_example_records_its_regions_args_and_io_bound_and_not_bound() {
    let s = Scratch::new("capi-cpp");
    let exe = build(&s, "g++", "c++17", &example("io_app.cpp"), "io_app_cpp");
    let out = run(&s, &exe, &[]);
    assert_eq!(out, "wrote and read 16384 bytes, streamed 1024\n");
    check_cpp_trace(&only_app_trace(&s, "app"), true);

    let s = Scratch::new("capi-cpp-nobind");
    run(&s, &exe, &["nobind"]);
    check_cpp_trace(&only_app_trace(&s, "app"), false);
}

#[test]
fn cmake_find_package_builds_both_examples() {
    if !have("cmake") {
        return skip("the CMake find_package(dftracer) build", "cmake");
    }
    let s = Scratch::new("capi-cmake");
    let src = s.path("proj");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("CMakeLists.txt"),
        format!(
            r#"cmake_minimum_required(VERSION 3.13)
project(dftracer_capi_test C CXX)
find_package(dftracer 4.3.0 EXACT REQUIRED)
if(NOT dftracer_VERSION STREQUAL "4.3.0")
  message(FATAL_ERROR "dftracer_VERSION is ${{dftracer_VERSION}}")
endif()
add_executable(io_app "{c}")
target_link_libraries(io_app PRIVATE dftracer::dftracer_core)
add_executable(io_app_cpp "{cpp}")
target_link_libraries(io_app_cpp PRIVATE dftracer)
"#,
            c = example("io_app.c").display(),
            cpp = example("io_app.cpp").display()
        ),
    )
    .unwrap();
    let bin = s.path("build");
    ok(Command::new("cmake")
        .arg("-S")
        .arg(&src)
        .arg("-B")
        .arg(&bin)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix().display()))
        .output()
        .unwrap());
    ok(Command::new("cmake")
        .arg("--build")
        .arg(&bin)
        .output()
        .unwrap());
    // The package is version 4.3.0 (the reference's native package version): no version, a
    // lower 4.x, a range holding it and EXACT 4.3.0 find it; a higher version, another major
    // version (2.2, the reference's Python release, as the reference's package refuses it
    // too), EXACT of another version and a range that ends below it do not.
    let find = |name: &str, request: &str| -> bool {
        let dir = s.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("CMakeLists.txt"),
            format!(
                "cmake_minimum_required(VERSION 3.19)\nproject(p C)\nfind_package(dftracer {request} REQUIRED)\n"
            ),
        )
        .unwrap();
        Command::new("cmake")
            .arg("-S")
            .arg(&dir)
            .arg("-B")
            .arg(s.path(&format!("{name}-build")))
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix().display()))
            .output()
            .unwrap()
            .status
            .success()
    };
    for (i, (request, found)) in [
        ("", true),
        ("4", true),
        ("4.1", true),
        ("4.3.0", true),
        ("4.3.0 EXACT", true),
        ("4.0...5.0", true),
        ("4.3.0...4.3.0", true),
        ("4.4", false),
        ("5.0", false),
        ("2.2", false),
        ("2.2.0 EXACT", false),
        ("4.1 EXACT", false),
        ("4.0...<4.3.0", false),
        ("3.0...4.2", false),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            find(&format!("v{i}"), request),
            found,
            "find_package(dftracer {request})"
        );
    }

    run(&s, &bin.join("io_app"), &[]);
    check_c_trace(&only_app_trace(&s, "app"), true);
    for f in s.traces() {
        std::fs::remove_file(f).unwrap();
    }
    run(&s, &bin.join("io_app_cpp"), &[]);
    check_cpp_trace(&only_app_trace(&s, "app"), true);
}

#[test]
fn install_layout_ships_the_reference_names_headers_and_version() {
    let lib = prefix().join("lib");
    // One file under the reference's SONAME, the other names link to it.
    let real = lib.join("libdftracer_core.so.4.3.0");
    assert!(std::fs::symlink_metadata(&real)
        .unwrap()
        .file_type()
        .is_file());
    for name in ["libdftracer_core.so", "libdftracer_preload.so"] {
        let l = lib.join(name);
        assert_eq!(
            std::fs::read_link(&l).unwrap(),
            Path::new("libdftracer_core.so.4.3.0"),
            "{name}"
        );
    }
    let dynamic = ok(Command::new("readelf")
        .arg("-d")
        .arg(&real)
        .output()
        .unwrap());
    assert!(
        dynamic.contains("Library soname: [libdftracer_core.so.4.3.0]"),
        "{dynamic}"
    );
    // The reference's C++ class members, exported under its mangled names.
    let syms = ok(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&real)
        .output()
        .unwrap());
    for sym in [
        "_ZN8DFTracerC1EPKcS1_i14TraceEventType",
        "_ZN8DFTracerC2EPKcS1_i14TraceEventType",
        "_ZN8DFTracer6updateEPKci12MetadataType",
        "_ZN8DFTracer6updateEPKcS1_12MetadataType",
        "_ZN8DFTracer8finalizeEv",
        "_ZN8DFTracerD1Ev",
        "_ZN8DFTracerD2Ev",
    ] {
        assert!(
            syms.lines().any(|l| l.ends_with(&format!(" T {sym}"))),
            "{sym} not exported"
        );
    }
    let inc = prefix().join("include/dftracer");
    for h in [
        "dftracer.h",
        "core/common/constants.h",
        "core/common/typedef.h",
        "core/common/cpp_typedefs.h",
        "core/common/enumeration.h",
    ] {
        assert_eq!(
            std::fs::read(inc.join(h)).unwrap(),
            std::fs::read(header_dir().join("dftracer").join(h)).unwrap(),
            "{h}"
        );
    }
    if !have("pkg-config") {
        return skip("the pkg-config version check", "pkg-config");
    }
    let pc = |args: &[&str]| {
        Command::new("pkg-config")
            .args(args)
            .arg("dftracer")
            .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
            .output()
            .unwrap()
    };
    assert_eq!(ok(pc(&["--modversion"])), "4.3.0\n");
    assert!(pc(&["--exact-version=4.3.0"]).status.success());
    assert!(pc(&["--atleast-version=4.3"]).status.success());
    assert!(!pc(&["--atleast-version=4.4"]).status.success());
}

#[test]
fn linked_and_preloaded_is_one_library_one_file_no_duplicates() {
    let s = Scratch::new("capi-hybrid");
    let exe = build(&s, "gcc", "c99", &example("io_app.c"), "io_app");
    let out = Command::new(&exe)
        .current_dir(&s.dir)
        .arg(s.path("data"))
        // The build's own file, not the installed copy the program is linked with (another
        // inode): only the SONAME match makes glibc map it once.
        .env("LD_PRELOAD", lib())
        .env("LD_DEBUG", "files")
        .env("LD_DEBUG_OUTPUT", s.path("ld"))
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_INIT", "PRELOAD")
        .env("DFTRACER_DATA_DIR", s.path("data"))
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .env_remove("DFTRACER_CONFIGURATION")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("DFTRACER_INC_METADATA")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ok(out);
    // The data dir of the init call is the preload's: nothing to warn about.
    assert!(!stderr.contains("DFTRACER"), "{stderr}");
    // The loader mapped (and initialised) the library once.
    let ld: String = std::fs::read_dir(&s.dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("ld."))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let inits: Vec<&str> = ld
        .lines()
        .filter(|l| l.contains("calling init:") && l.contains("libdftracer"))
        .collect();
    assert_eq!(inits.len(), 1, "{inits:#?}");
    // Started by the preload constructor, claimed by initialize_main: one `-app` file, and
    // everything in it exactly once.
    let t = only_app_trace(&s, "app");
    check_c_trace(&t, true);
}

#[test]
fn tracing_off_writes_nothing_and_changes_nothing() {
    let s = Scratch::new("capi-off");
    let exe = build(&s, "gcc", "c99", &example("io_app.c"), "io_app");
    let out = Command::new(&exe)
        .current_dir(&s.dir)
        .arg(s.path("data"))
        .env_remove("DFTRACER_ENABLE")
        .env_remove("LD_LIBRARY_PATH")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ok(out), "wrote and read 16384 bytes, streamed 1024\n");
    assert!(s.traces().is_empty(), "{:?}", s.traces());
}

// ---------------------------------------------------------------- edges

const EDGES: &str = r#"
#include <dftracer/dftracer.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define KEEP(call) do { errno = 4321; call; if (errno != 4321) { fprintf(stderr, "errno changed by %s\n", #call); exit(91); } } while (0)
int main(int argc, char **argv) {
  (void)argc;
  /* A region before any initialize starts tracing from the environment, without I/O. */
  struct DFTracerData *early = NULL;
  KEEP(early = initialize_region("early", NULL, DF_DATA_EVENT));
  if (!early) { fprintf(stderr, "no early region\n"); return 92; }
  KEEP(finalize_region(early));
  /* initialize_main then names the file and binds I/O; process_id is not used. */
  int pid = 42;
  KEEP(initialize_main(argv[1], argv[2], &pid));
  if (pid != 42) return 93;
  KEEP(initialize_main("ignored.pfw", NULL, NULL));   /* a second call is ignored */
  char path[600];
  snprintf(path, sizeof path, "%s/edge.bin", argv[2]);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "abc", 3) != 3 || close(fd) != 0) return 94;
  /* NULLs and pointers that are not regions */
  struct DFTracerData *none = NULL;
  long on_stack = 0;
  KEEP(finalize_region(NULL));
  KEEP(finalize_region_cleanup(NULL));
  KEEP(finalize_region_cleanup(&none));
  KEEP(finalize_region((struct DFTracerData *)&on_stack));
  KEEP(update_metadata_int(NULL, "k", 1));
  KEEP(update_metadata_string((struct DFTracerData *)&on_stack, "k", "v"));
  KEEP(set_app_metadata_int(NULL, 1));
  KEEP(set_app_metadata_string("k", NULL));
  KEEP(set_app_metadata_string(NULL, NULL));
  KEEP(mark_used(NULL));
  struct DFTracerData *r = NULL;
  KEEP(r = initialize_region(NULL, NULL, DF_DATA_EVENT));   /* name "", cat C_APP */
  KEEP(update_metadata_string(r, NULL, "v"));
  KEEP(update_metadata_string(r, "k", NULL));
  KEEP(update_metadata_int(r, "n", 1));
  KEEP(update_metadata_int(r, "n", 2));                     /* same key: replaced */
  KEEP(finalize_region(r));
  KEEP(finalize_region(r));                                 /* twice: once recorded */
  KEEP(update_metadata_int(r, "late", 3));
  struct DFTracerData *meta = NULL;
  KEEP(meta = initialize_region(NULL, NULL, DF_METADATA_EVENT));
  KEEP(update_metadata_int(meta, "ignored", 1));
  KEEP(finalize_region_cleanup(&meta));
  if (meta != NULL) return 95;
  KEEP(finalize());
  KEEP(finalize());
  /* after finalize: nothing recorded, nothing crashes */
  struct DFTracerData *after = NULL;
  KEEP(after = initialize_region("after", "C_APP", DF_DATA_EVENT));
  KEEP(finalize_region(after));
  KEEP(initialize_main(NULL, NULL, NULL));
  puts("ok");
  return 0;
}
"#;

#[test]
fn nulls_foreign_pointers_and_lifecycle_edges_are_harmless() {
    let s = Scratch::new("capi-edges");
    let src = s.path("edges.c");
    std::fs::write(&src, EDGES).unwrap();
    let exe = build(&s, "gcc", "c99", &src, "edges");
    let out = Command::new(&exe)
        .current_dir(&s.dir)
        .arg(s.path("o/named.pfw.gz"))
        .arg(s.path("data"))
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_LOG_FILE", s.path("o/env-prefix"))
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_INIT")
        .env_remove("DFTRACER_DATA_DIR")
        .env_remove("DFTRACER_CONFIGURATION")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("DFTRACER_INC_METADATA")
        .output()
        .unwrap();
    let pid = out.status.code();
    assert_eq!(ok(out), "ok\n", "{pid:?}");
    let files = s.traces();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("named-") && name.ends_with("-app.pfw.gz"),
        "the explicit log_file names the file started by the early region: {name}"
    );
    let t = Trace::read(&files[0]);
    assert_eq!(counts(&t, 2), map(&[("", 1), ("early", 1)]));
    let unnamed = events(&t, "")[0];
    assert_eq!(unnamed["cat"], "C_APP");
    let args = unnamed["args"].as_object().unwrap();
    let keys: Vec<&str> = args.keys().map(|k| k.as_str()).collect();
    assert_eq!(keys, vec!["hhash", "n"], "NULL keys/values are skipped");
    assert_eq!(args["n"], 2);
    // The metadata region: a CM record with empty name and value, no args of its own.
    let cm: Vec<&J> = t
        .lines
        .iter()
        .filter(|l| l["ph"] == 4 && l["name"] == "CM" && l["type"] == 2)
        .collect();
    assert_eq!(cm.len(), 1);
    assert_eq!(
        (&cm[0]["args"]["name"], &cm[0]["args"]["value"]),
        (&J::from(""), &J::from(""))
    );
    // I/O after the (late) bind is traced; the real pid is recorded.
    let (posix, _) = posix_stdio(&t);
    assert_eq!(posix, map(&[("close", 1), ("open", 1), ("write", 1)]));
    let pids: std::collections::BTreeSet<u64> =
        t.lines.iter().filter_map(|l| l["pid"].as_u64()).collect();
    assert_eq!(pids.len(), 1);
    assert_ne!(pids.into_iter().next(), Some(42));
    assert_eq!(end(&t)["args"]["cfg"]["bind"], 1);
}

// ---------------------------------------------------------------- call sites, threads

const SITES: &str = r#"
#define _POSIX_C_SOURCE 200809L
#include <dftracer/dftracer.h>
#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define KEEP(call) do { errno = 4321; call; if (errno != 4321) { fprintf(stderr, "errno changed by %s\n", #call); exit(91); } } while (0)
static void work(int i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("i", i);
  DFTRACER_C_REGION_START(inner);
  DFTRACER_C_REGION_END(inner);
  DFTRACER_C_FUNCTION_END();
}
static void plain(void) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_END();
}
static void two(int i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("step", i);
  DFTRACER_C_FUNCTION_UPDATE_INT("rank", -3);
  DFTRACER_C_FUNCTION_UPDATE_INT("step", i + 10);
  DFTRACER_C_FUNCTION_END();
}
static void mixed(int i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("step", i + 10);
  DFTRACER_C_FUNCTION_UPDATE_INT("rank", -3);
  DFTRACER_C_FUNCTION_UPDATE_STR("s", "x");
  DFTRACER_C_FUNCTION_END();
}
static void *other(void *p) {
  /* A macro region's handle ended and updated from another thread: ignored. */
  struct DFTracerData *d = (struct DFTracerData *)p;
  update_metadata_int(d, "foreign", 1);
  finalize_region(d);
  return NULL;
}
int main(int argc, char **argv) {
  DFTRACER_C_INIT_NO_BIND(NULL, NULL, NULL);
  (void)argv;
  if (argc > 1) {
    /* Waits until the library's clock is the TSC (a first event starts its calibration): the
     * header then opens every frame below inline, without dftracer_frame_open_. */
    { DFTRACER_C_REGION_START(warm); DFTRACER_C_REGION_END(warm); }
    int tsc = 0;
    for (int i = 0; i < 400 && !tsc; i++) {
      tsc = &dftracer_fast_ != NULL && !(*dftracer_fast_.clock & 1);
      struct timespec pause = {0, 10000000};
      if (!tsc) nanosleep(&pause, NULL);
    }
    puts(tsc ? "tsc" : "no tsc");
  }
  for (int i = 0; i < 3; i++) KEEP(work(i));
  for (int i = 0; i < 5; i++) KEEP(plain());
  for (int i = 0; i < 3; i++) { KEEP(two(i)); KEEP(mixed(i)); }
  /* One buffer, two names, at the same address: each event keeps its own name. */
  char buf[16];
  for (int i = 0; i < 4; i++) {
    strcpy(buf, i % 2 ? "beta" : "alpha");
    struct DFTracerData *r;
    KEEP(r = initialize_region(buf, "C_APP", DF_DATA_EVENT));
    KEEP(finalize_region(r));
    strcpy(buf, i % 2 ? "gamma" : "alph");
    KEEP(r = dftracer_scope_begin(buf, "C_APP", DF_DATA_EVENT, 2));
    KEEP(finalize_region(r));
  }
  {
    DFTRACER_C_REGION_START(handed);
    pthread_t t;
    if (pthread_create(&t, NULL, other, data_handed) != 0 || pthread_join(t, NULL) != 0) return 92;
    DFTRACER_C_REGION_UPDATE_INT(handed, "own", 2);
    /* The reference's function on the macro's pointer, from the owner thread: taken. */
    KEEP(update_metadata_int(data_handed, "ref_own", 5));
    DFTRACER_C_REGION_END(handed);
  }
  DFTRACER_C_FINI();
  puts("ok");
  return 0;
}
"#;

/// Runs `exe` traced into `o/trace` in the scratch dir, with nothing else of ours in its
/// environment (no preload, no init mode, no configuration, metadata at its default).
fn run_traced(s: &Scratch, exe: &Path) -> std::process::Output {
    run_traced_with(s, exe, &[])
}

fn run_traced_with(s: &Scratch, exe: &Path, args: &[&str]) -> std::process::Output {
    Command::new(exe)
        .args(args)
        .current_dir(&s.dir)
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_INIT")
        .env_remove("DFTRACER_CONFIGURATION")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("DFTRACER_INC_METADATA")
        .output()
        .unwrap()
}

/// The macros' regions (cached per call site, owned by their thread) record what the
/// general path records: every call once, the name the string holds at that call, args;
/// nested events nested; another thread's end or update of a macro region is ignored and the
/// owner's end records it.
///
/// Run twice: at once (the library's clock is still the vDSO's while the TSC is calibrated,
/// so the header calls `dftracer_frame_open_`), and after waiting for the TSC (the header
/// then fills every frame inline: the same events, the same nesting, the same foreign-thread
/// rules, whose owner check reads the thread the header wrote).
#[test]
fn macro_regions_per_call_site_and_per_thread() {
    let s = Scratch::new("capi-sites");
    let src = s.path("sites.c");
    std::fs::write(&src, SITES).unwrap();
    let exe = build(&s, "gcc", "c99", &src, "sites");
    assert_eq!(ok(run_traced(&s, &exe)), "ok\n");
    check_sites(&only_app_trace(&s, "app"), false);

    let s2 = Scratch::new("capi-sites-tsc");
    match ok(run_traced_with(&s2, &exe, &["tsc"])).as_str() {
        "tsc\nok\n" => {}
        "no tsc\nok\n" => eprintln!(
            "note: the library's clock never became the TSC here (not invariant, or not the \
             kernel's clocksource): the inline frame start was not exercised"
        ),
        other => panic!("{other}"),
    }
    check_sites(&only_app_trace(&s2, "app"), true);
}

fn check_sites(t: &Trace, warm: bool) {
    let mut want = vec![
        ("alph", 2),
        ("alpha", 2),
        ("beta", 2),
        ("gamma", 2),
        ("handed", 1),
        ("inner", 3),
        ("mixed", 3),
        ("plain", 5),
        ("two", 3),
        ("work", 3),
    ];
    if warm {
        want.push(("warm", 1));
    }
    assert_eq!(counts(t, 2), map(&want));
    let works = events(t, "work");
    let inners = events(t, "inner");
    for (i, (w, n)) in works.iter().zip(&inners).enumerate() {
        assert_eq!(w["args"]["i"], i as u64, "{w}");
        assert_eq!(w["cat"], "C_APP");
        let (wt, wd) = (w["ts"].as_u64().unwrap(), w["dur"].as_u64().unwrap());
        let (nt, nd) = (n["ts"].as_u64().unwrap(), n["dur"].as_u64().unwrap());
        assert!(nt >= wt && nt + nd <= wt + wd, "inner {n} not inside {w}");
    }
    // Integer args only (a keyed schema's static record) and the same with a string arg (the
    // general path): the same keys in the same order, the last value of a repeated key.
    let keys = |e: &J| -> Vec<String> { e["args"].as_object().unwrap().keys().cloned().collect() };
    for (i, (a, b)) in events(t, "two").iter().zip(events(t, "mixed")).enumerate() {
        assert_eq!(keys(a), ["hhash", "step", "rank"], "{a}");
        assert_eq!(keys(b), ["hhash", "step", "rank", "s"], "{b}");
        assert_eq!(
            (&a["args"]["step"], &a["args"]["rank"]),
            (&J::from(i + 10), &J::from(-3))
        );
        assert_eq!(
            (&a["args"]["step"], &a["args"]["hhash"]),
            (&b["args"]["step"], &b["args"]["hhash"])
        );
    }
    let handed = events(t, "handed")[0];
    assert_eq!(handed["args"]["own"], 2, "{handed}");
    assert_eq!(handed["args"]["ref_own"], 5, "{handed}");
    // Every region on the trace's clock: between the process's start and end records.
    let at = |name: &str| events(t, name)[0]["ts"].as_u64().unwrap();
    let (start, stop) = (at("start"), at("end"));
    for e in t
        .lines
        .iter()
        .filter(|l| l["ph"] == 1 && l["cat"] == "C_APP")
    {
        let (ts, dur) = (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
        assert!(
            start <= ts && ts + dur <= stop,
            "{e} not within {start}..{stop}"
        );
    }
    assert!(handed["args"].get("foreign").is_none(), "{handed}");
}

const OFF_ARGS: &str = r#"
#include <dftracer/dftracer.h>
#include <stdio.h>
static int n;
static int next(void) { return n++; }
static void f(void) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("a", next());
  DFTRACER_C_FUNCTION_UPDATE_INT_TYPE("b", next(), next());
  DFTRACER_C_REGION_START(r);
  DFTRACER_C_REGION_UPDATE_STR(r, "c", next() ? "x" : "y");
  DFTRACER_C_REGION_END(r);
  DFTRACER_C_FUNCTION_END();
}
int main(void) {
  for (int i = 0; i < 10; i++) f();
  printf("%d\n", n);
  return 0;
}
"#;

/// With tracing off the macros call nothing, yet their arguments are evaluated once each,
/// as the reference's calls evaluate them (side effects in an UPDATE argument stay).
#[test]
fn update_arguments_are_evaluated_once_with_tracing_on_and_off() {
    let s = Scratch::new("capi-offargs");
    let src = s.path("offargs.c");
    std::fs::write(&src, OFF_ARGS).unwrap();
    let exe = build(&s, "gcc", "c99", &src, "offargs");
    for enable in ["0", "1"] {
        let out = Command::new(&exe)
            .current_dir(&s.dir)
            .env("DFTRACER_ENABLE", enable)
            .env("DFTRACER_LOG_FILE", s.path("o/trace"))
            .env_remove("LD_PRELOAD")
            .env_remove("DFTRACER_INIT")
            .env_remove("DFTRACER_CONFIGURATION")
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert_eq!(ok(out), "40\n", "DFTRACER_ENABLE={enable}");
    }
}

// ---------------------------------------------------------------- frames

const FRAMES: &str = r#"
#include <dftracer/dftracer.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define KEEP(call) do { errno = 4321; call; if (errno != 4321) { fprintf(stderr, "errno changed by %s\n", #call); exit(91); } } while (0)
/* The reference's functions given the macros' data_fn: the frame's region takes them. */
static void direct(int i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("a", i);
  update_metadata_int(data_fn, "b", i + 1);
  update_metadata_string(data_fn, "s", "x");
  DFTRACER_C_FUNCTION_UPDATE_INT("a", i + 2);
  finalize_region(data_fn);
  finalize_region(data_fn); /* once */
  DFTRACER_C_FUNCTION_END();
}
/* Three int keys: the third moves the region into a cell, args in order. */
static void three(int i) {
  DFTRACER_C_REGION_START(three);
  DFTRACER_C_REGION_UPDATE_INT(three, "x", i);
  DFTRACER_C_REGION_UPDATE_INT(three, "y", 2 * i);
  DFTRACER_C_REGION_UPDATE_INT(three, "x", 3 * i);
  DFTRACER_C_REGION_UPDATE_INT(three, "z", 4 * i);
  DFTRACER_C_REGION_UPDATE_INT(three, "y", 5 * i);
  DFTRACER_C_REGION_END(three);
}
/* One key text under two pointers: one arg, the later value; a key in a buffer that
 * changes between calls: each event keeps the text of its own call. */
static void dup(int i, const char *k) {
  char k1[8], k2[8];
  strcpy(k1, "dup");
  strcpy(k2, "dup");
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT(k1, i);
  DFTRACER_C_FUNCTION_UPDATE_INT(k2, i + 100);
  DFTRACER_C_FUNCTION_END();
  DFTRACER_C_REGION_START(keyed);
  DFTRACER_C_REGION_UPDATE_INT(keyed, k, i);
  DFTRACER_C_REGION_END(keyed);
}
/* An early return: the cleanup ends the frame. */
static int early(int i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("i", i);
  if (i % 2) return i;
  DFTRACER_C_FUNCTION_END();
  return 0;
}
int main(void) {
  DFTRACER_C_INIT_NO_BIND(NULL, NULL, NULL);
  char kb[8];
  for (int i = 0; i < 4; i++) {
    KEEP(direct(i));
    KEEP(three(i));
    strcpy(kb, i % 2 ? "odd" : "even");
    KEEP(dup(i, kb));
    KEEP(early(i));
  }
  DFTRACER_C_FINI();
  puts("ok");
  return 0;
}
"#;

/// The macros' regions kept on the caller's stack (frames) record what a region cell
/// records: the reference's functions given `data_fn` update and end it (once), a third
/// int key or a string arg moves it into a cell with its args in order, one key text under
/// two pointers is one arg, a key in a reused buffer keeps each call's text, an early
/// return ends it; errno is never changed.
#[test]
fn macro_frames_take_the_reference_functions_and_keep_their_args() {
    let s = Scratch::new("capi-frames");
    let src = s.path("frames.c");
    std::fs::write(&src, FRAMES).unwrap();
    for (compiler, std, exe) in [("gcc", "c99", "frames-c"), ("g++", "c++17", "frames-cpp")] {
        let exe = build(&s, compiler, std, &src, exe);
        let _ = std::fs::remove_dir_all(s.path("o"));
        assert_eq!(ok(run_traced(&s, &exe)), "ok\n");
        let t = only_app_trace(&s, "app");
        assert_eq!(
            counts(&t, 2),
            map(&[
                ("direct", 4),
                ("dup", 4),
                ("early", 4),
                ("keyed", 4),
                ("three", 4)
            ]),
            "{compiler}"
        );
        let args = |e: &J| -> Vec<(String, J)> {
            e["args"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| *k != "hhash")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let kv = |v: &[(&str, J)]| -> Vec<(String, J)> {
            v.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
        };
        for (i, e) in events(&t, "direct").iter().enumerate() {
            let i = i as i64;
            assert_eq!(
                args(e),
                kv(&[
                    ("a", J::from(i + 2)),
                    ("b", J::from(i + 1)),
                    ("s", J::from("x"))
                ]),
                "{e}"
            );
        }
        for (i, e) in events(&t, "three").iter().enumerate() {
            let i = i as i64;
            assert_eq!(
                args(e),
                kv(&[
                    ("x", J::from(3 * i)),
                    ("y", J::from(5 * i)),
                    ("z", J::from(4 * i))
                ]),
                "{e}"
            );
        }
        for (i, e) in events(&t, "dup").iter().enumerate() {
            assert_eq!(args(e), kv(&[("dup", J::from(i as i64 + 100))]), "{e}");
        }
        for (i, e) in events(&t, "keyed").iter().enumerate() {
            let k = if i % 2 == 1 { "odd" } else { "even" };
            assert_eq!(args(e), kv(&[(k, J::from(i as i64))]), "{e}");
        }
        for (i, e) in events(&t, "early").iter().enumerate() {
            assert_eq!(args(e), kv(&[("i", J::from(i as i64))]), "{e}");
        }
    }
}
