"""DFTracer (Rust implementation): `dftracer.dftracer` is the native module,
`dftracer.python` the annotation API (`dftracer`, `dft_fn`)."""
