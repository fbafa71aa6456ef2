# Every target, one line each: `make help` (also what plain `make` prints). A target's `##`
# comment is its help line. Each target sets up what it needs (scripts/env.sh).
.DEFAULT_GOAL := help

.PHONY: help
help:            ## this list
	@echo "make TARGET, from the repository's root (prerequisites: README.md, 'Prerequisites'):"
	@awk -F':[^#]*## ' '/^[a-z][a-z-]*:[^#]*## /{printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: demo
demo:            ## traced training-like run + the node service; prints where the traces are
	bash scripts/demo.sh

.PHONY: test
test:            ## everything CI runs (10-20 min on 2 cores); logs in target/test-logs/
	bash scripts/test.sh

.PHONY: lint
lint:            ## cargo fmt --check, clippy -D warnings, cargo doc -D warnings
	bash scripts/test.sh lint

.PHONY: test-rust
test-rust:       ## Rust unit and integration tests only (with the builds they need)
	bash scripts/test.sh rust

.PHONY: test-python
test-python:     ## the wheel and the Python frontend's pytest suite only
	bash scripts/test.sh python

.PHONY: test-fuzz
test-fuzz:       ## fuzz targets' seed replay + bounded random inputs (stable Rust) only
	bash scripts/test.sh fuzz

.PHONY: test-docs
test-docs:       ## run every README's python and sh blocks only
	bash scripts/test.sh docs

.PHONY: ecosystem
ecosystem:       ## dftracer-utils 0.0.14 from PyPI validates and counts our traces
	bash scripts/test.sh ecosystem

.PHONY: native
native:          ## the C/C++ library under both names; PREFIX=dir: also the install layout
	bash scripts/native-lib.sh $(if $(PREFIX),--prefix $(PREFIX))

.PHONY: install
install:         ## C/C++ library, headers, pkg-config, CMake files, dftracer tool into PREFIX (/usr/local)
	bash scripts/install.sh $(or $(PREFIX),/usr/local)

.PHONY: dist
dist:            ## manylinux_2_28 wheels (each CPython 3.9-3.13 found) + sdist into dist/, checked
	bash scripts/dist.sh

.PHONY: sanitize
sanitize:        ## Miri (ring, preload tables), ASan + TSan (core lifecycle tests); needs nightly
	bash scripts/sanitize.sh

.PHONY: bench
bench:           ## full overhead benchmarks against the reference (long; not part of test)
	bash scripts/bench.sh

.PHONY: fuzz-long
fuzz-long:       ## coverage-guided fuzzing (long; see fuzz/README.md)
	bash scripts/fuzz-long.sh

.PHONY: test-many-files
test-many-files: ## preload: 2,000,000 distinct files in flat memory (make test uses 500,000)
	DFTRACER_TEST_FILES=2000000 cargo test --release -p dftracer-preload --test preload \
	  millions_of_distinct_files_in_flat_memory -- --nocapture

.PHONY: clean
clean:           ## remove what the build, tests and demo made here (target/, venvs, dft-demo/)
	bash scripts/clean.sh
