//! The reference DFTracer 2.2.0's wheel, fetched once per target dir (`pip download --no-deps
//! dftracer==2.2.0`, the cp311 manylinux_2_28 x86_64 wheel, whatever Python runs the test)
//! into `target/ref-wheel/` and unpacked there: its headers, `lib64/libdftracer_core.so` and
//! `lib64/libdftracer_preload.so`. `None` (said on stderr) when the registry cannot be reached.

use super::{lib, ok};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The target directory of this build (`target/`).
pub fn target_dir() -> PathBuf {
    lib().parent().unwrap().parent().unwrap().to_path_buf()
}

/// What pip prints when it cannot reach the registry (and nothing else does).
pub fn unreachable(out: &str) -> bool {
    [
        "NewConnectionError",
        "ConnectionError",
        "ConnectTimeout",
        "ReadTimeout",
        "Max retries exceeded",
        "Temporary failure in name resolution",
        "Name or service not known",
        "Network is unreachable",
        "No route to host",
        "Connection refused",
        "ProxyError",
        "timed out",
    ]
    .iter()
    .any(|m| out.contains(m))
}

/// The unpacked reference wheel (its root: `dftracer/include`, `dftracer/lib64`,
/// `dftracer.libs`), or `None` when the registry is unreachable (said on stderr).
pub fn reference() -> Option<&'static Path> {
    static REF: OnceLock<Option<PathBuf>> = OnceLock::new();
    REF.get_or_init(|| {
        let cache = target_dir().join("ref-wheel");
        let root = cache.join("dftracer-2.2.0");
        if root.join(".complete").exists() {
            return Some(root);
        }
        if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            eprintln!("SKIPPED the reference binaries: its wheel used here is x86_64 Linux");
            return None;
        }
        let dl = cache.join("download");
        std::fs::create_dir_all(&dl).unwrap();
        let out = Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .args([
                "--platform",
                "manylinux_2_28_x86_64",
                "--python-version",
                "311",
            ])
            .args(["--implementation", "cp", "--abi", "cp311"])
            .args(["--retries", "2", "--timeout", "30", "-d"])
            .arg(&dl)
            .arg("dftracer==2.2.0")
            .output()
            .expect("python3 -m pip (needed to fetch the reference wheel)");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            if unreachable(&text) {
                eprintln!(
                    "SKIPPED the reference binaries: the package registry is unreachable \
                     (pip download dftracer==2.2.0):\n{text}"
                );
                return None;
            }
            panic!("pip download dftracer==2.2.0 failed:\n{text}");
        }
        let wheel = std::fs::read_dir(&dl)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.starts_with("dftracer-2.2.0-") && n.ends_with(".whl")
            })
            .unwrap_or_else(|| panic!("no dftracer-2.2.0 wheel in {}:\n{text}", dl.display()));
        // Unpacked beside, then renamed into place (another test process may race us).
        let tmp = cache.join(format!("unpack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        ok(Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&tmp)
            .output()
            .unwrap());
        std::fs::write(tmp.join(".complete"), b"").unwrap();
        if std::fs::rename(&tmp, &root).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        assert!(root.join(".complete").exists());
        Some(root)
    })
    .as_deref()
}

/// The reference's preload library in the unpacked wheel.
pub fn preload_lib(root: &Path) -> PathBuf {
    root.join("dftracer/lib64/libdftracer_preload.so")
}
