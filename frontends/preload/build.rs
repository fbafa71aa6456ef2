//! Gives the cdylib the SONAME `libdftracer_core.so.4.3.0`, the reference DFTracer 2.2.0's
//! (its native library package is version 4.3.0), so that programs linked against the
//! reference's `libdftracer_core.so` (`DT_NEEDED libdftracer_core.so.4.3.0`) load this one
//! unchanged. The same file is shipped under three names (`libdftracer_core.so.4.3.0`, what
//! linked programs need; `libdftracer_core.so` for `-ldftracer_core`;
//! `libdftracer_preload.so` for `LD_PRELOAD`); glibc matches a program's `DT_NEEDED` against
//! the SONAME of an object already loaded by `LD_PRELOAD`, so a linked program that is also
//! preloaded maps one copy, hence one tracer and one trace file.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdftracer_core.so.4.3.0");
    println!("cargo:rerun-if-changed=build.rs");
}
