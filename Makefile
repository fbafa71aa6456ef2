# The handful of targets the README and CI call. Each one sets up what it needs.
.PHONY: demo native test lint test-rust test-python test-fuzz ecosystem bench fuzz-long test-many-files sanitize

demo:            ## traced training-like run + the service; prints where the traces are
	bash scripts/demo.sh

native:          ## the C/C++ library under both names; with PREFIX=dir also the install layout
	bash scripts/native-lib.sh $(if $(PREFIX),--prefix $(PREFIX))

test:            ## everything CI runs
	bash scripts/test.sh

lint:
	bash scripts/test.sh lint

bench:           ## full overhead benchmarks (long; not part of test)
	bash scripts/bench.sh

fuzz-long:       ## coverage-guided fuzzing (long; see fuzz/README.md)
	bash scripts/fuzz-long.sh

test-many-files: ## preload: 2,000,000 distinct files in flat memory (the normal run uses 500,000)
	DFTRACER_TEST_FILES=2000000 cargo test --release -p dftracer-preload --test preload \
	  millions_of_distinct_files_in_flat_memory -- --nocapture

sanitize:        ## Miri (ring, preload tables), ASan + TSan (core lifecycle tests); needs nightly
	bash scripts/sanitize.sh
