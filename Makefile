# The handful of targets the README and CI call. Each one sets up what it needs.
.PHONY: demo test lint test-rust test-python test-fuzz ecosystem bench fuzz-long sanitize

demo:            ## traced training-like run + the service; prints where the traces are
	bash scripts/demo.sh

test:            ## everything CI runs
	bash scripts/test.sh

lint:
	bash scripts/test.sh lint

bench:           ## full overhead benchmarks (long; not part of test)
	bash scripts/bench.sh

fuzz-long:       ## coverage-guided fuzzing (long; see fuzz/README.md)
	bash scripts/fuzz-long.sh

sanitize:        ## Miri (ring, preload tables), ASan + TSan (core lifecycle tests); needs nightly
	bash scripts/sanitize.sh
