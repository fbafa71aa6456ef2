//! Gives the cdylib the SONAME `libdftracer_core.so`. The same file is shipped under two names
//! (`libdftracer_core.so` for `-ldftracer_core`, `libdftracer_preload.so` for `LD_PRELOAD`);
//! glibc matches a program's `DT_NEEDED libdftracer_core.so` against the SONAME of an object
//! already loaded by `LD_PRELOAD`, so a linked program that is also preloaded maps one copy,
//! hence one tracer and one trace file.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdftracer_core.so");
    println!("cargo:rerun-if-changed=build.rs");
}
