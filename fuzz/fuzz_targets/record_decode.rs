#![no_main]
// The harness is dftracer_fuzz::record_decode; tests/replay.rs runs the same function on stable.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dftracer_fuzz::record_decode(data));
