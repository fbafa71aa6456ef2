//! Builds the native library (`frontends/preload`: the core, the I/O hooks, the C API) and
//! puts it, with its header and package files, into the Python package (`python/dftracer/`),
//! so that a wheel carries everything: `dftracer/_native/lib/libdftracer_core.so` (which this module
//! loads: one core per process), `dftracer/_native/lib/libdftracer_core.so.4.3.0` (the same library
//! under its SONAME, the reference's, which programs linked against it need),
//! `dftracer/_native/lib/libdftracer_preload.so` (the same again under the name `LD_PRELOAD` users
//! know), `dftracer/_native/include/dftracer/dftracer.h` with `dftracer/core/common/*.h`, and the
//! pkg-config and CMake files under `dftracer/_native/lib/`; and the `dftracer` command-line tool
//! (`frontends/cli`) as `dftracer/_native/bin/dftracer`.
use std::path::Path;
use std::process::Command;

fn main() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .join("../..")
        .canonicalize()
        .expect("workspace root");
    for p in [
        "core/src",
        "core/build.rs",
        "frontends/preload/src",
        "frontends/preload/include",
        "frontends/cli/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("frontends/preload/pkg").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        root.join("frontends/preload/pkg/native-lib.sh").display()
    );
    // The package's directory: frontends/python/python/dftracer in the clone; in the sdist,
    // where maturin puts pyproject.toml and python/ at the root, <root>/python/dftracer. The
    // files go under its `_native/`: pydftracer 1.x's wheel writes `dftracer/lib` and
    // `dftracer/include` (and deletes them when uninstalled).
    let pkg = [
        manifest.join("python/dftracer"),
        root.join("python/dftracer"),
    ]
    .into_iter()
    .find(|d| d.join("_rs_init.py").is_file())
    .expect("the dftracer package directory (python/dftracer)")
    .join("_native");
    // Its own target directory: the outer cargo holds the lock of the workspace's. A linker
    // given in the environment (`maturin build --zig`: a zig wrapper that links against an
    // older glibc, for manylinux wheels) links the nested builds too, in a directory of its
    // own so that the local builds of target/native are neither reused nor overwritten.
    let linker_var = format!(
        "CARGO_TARGET_{}_LINKER",
        std::env::var("TARGET")
            .unwrap_or_default()
            .to_uppercase()
            .replace(['-', '.'], "_")
    );
    println!("cargo:rerun-if-env-changed={linker_var}");
    // The files go into the source tree, shared by every build (another target dir, another
    // linker, `cargo clippy`): a build whose own script did not rerun would package what the
    // last one wrote. scripts/dist.sh sets a new value for each wheel, so each writes its own.
    println!("cargo:rerun-if-env-changed=DFTRACER_NATIVE_REBUILD");
    let target = match std::env::var(&linker_var) {
        Ok(linker) if !linker.is_empty() => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&linker, &mut h);
            root.join(format!(
                "target/native-{:016x}",
                std::hash::Hasher::finish(&h)
            ))
        }
        _ => root.join("target/native"),
    };
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("frontends/preload/pkg/native-lib.sh"))
        .arg("--prefix")
        .arg(&pkg)
        .arg("--target-dir")
        .arg(&target);
    run_nested(cmd, "the native library");
    // A wheel stores files, not symlinks: the names native-lib.sh links to the SONAME file
    // (`libdftracer_core.so`, `libdftracer_preload.so`) become copies of it. Debug info stays
    // in the build tree, not in the package.
    let lib = pkg.join("lib");
    let soname = lib.join("libdftracer_core.so.4.3.0");
    let _ = Command::new("strip")
        .arg("--strip-debug")
        .arg(&soname)
        .status();
    for name in ["libdftracer_core.so", "libdftracer_preload.so"] {
        let copy = lib.join(name);
        let _ = std::fs::remove_file(&copy);
        std::fs::copy(&soname, &copy).unwrap_or_else(|e| panic!("copy {name}: {e}"));
    }

    // The `dftracer` command-line tool (frontends/cli): a binary of its own, so it is built
    // here like the library and run by the `dftracer` console script (`dftracer/cli.py`).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "dftracer-cli",
            "--target-dir",
        ])
        .arg(&target);
    run_nested(cmd, "the dftracer tool");
    let bin = pkg.join("bin");
    std::fs::create_dir_all(&bin).expect("dftracer/_native/bin");
    let tool = bin.join("dftracer");
    let _ = std::fs::remove_file(&tool);
    std::fs::copy(target.join("release/dftracer"), &tool).expect("copy the dftracer tool");
    let _ = Command::new("strip")
        .arg("--strip-debug")
        .arg(&tool)
        .status();
}

/// Runs a nested build without the outer cargo's target settings; panics with its output
/// when it fails.
fn run_nested(mut cmd: Command, what: &str) {
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("building {what}: {e}"));
    if !out.status.success() {
        panic!(
            "building {what} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
