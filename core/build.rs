//! Sets `DFTRACER_BUILD_ID`: a hash of this crate's sources, its version and the compiler. Two
//! frontends in one process (the Python module and the native library) share one core only
//! when their ids are equal, because they pass Rust values to each other (`api::Api`).
use std::hash::{Hash, Hasher};
use std::path::Path;

fn walk(dir: &Path, h: &mut std::collections::hash_map::DefaultHasher) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, h);
        } else if let Ok(bytes) = std::fs::read(&p) {
            p.file_name().hash(h);
            bytes.hash(h);
        }
    }
}

fn main() {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut h);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    if let Ok(out) = std::process::Command::new(rustc).arg("-vV").output() {
        out.stdout.hash(&mut h);
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    walk(&src, &mut h);
    println!("cargo:rustc-env=DFTRACER_BUILD_ID={:016x}", h.finish());
    println!("cargo:rerun-if-changed=src");
}
