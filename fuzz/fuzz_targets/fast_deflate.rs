#![no_main]
// The harness is dftracer_fuzz::fast_deflate; tests/replay.rs runs the same function on stable.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dftracer_fuzz::fast_deflate(data));
