# The README's two set-up commands, on a fresh Debian 12 machine as root:
#   make demo   install missing packages, build, run experiments/demo.yaml -> results/demo.csv + results/demo.png
#   make test   install missing packages, build, run the whole CTest suite (unit, sim, cli)
#   (make sanitize: the suite again under ASan + UBSan; make fuzz: the libFuzzer targets, FUZZ_SECONDS
#   each; CI runs all three, fuzz for 20 s a target)
# Other targets: deps (packages only), build, bench (every `ddlsim bench` scenario, medians of 3 ->
# results/bench.csv and docs/performance.md), bench-allocator (a few of them with glibc's malloc, for
# that page), crosscheck (experiments/crosscheck_host.yaml simulated
# and run on this CPU -> results/crosscheck_host.csv + .png), golden (regenerate tests/golden/, or
# GOLDEN="NAME..." of it: docs/testing.md), clean. BUILD=dir and JOBS=n override the defaults.

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Debian's own interpreter, which sees python3-matplotlib (another python3 may come first on PATH).
PYTHON := /usr/bin/python3
DEBS := build-essential cmake pkg-config git libsimgrid-dev libboost-graph-dev libyaml-cpp-dev doctest-dev zlib1g-dev libopenblas-dev libopenmpi-dev \
        libcli11-dev libfmt-dev libprotobuf-dev protobuf-compiler libsimdjson-dev libgoogle-perftools-dev \
        python3 python3-matplotlib python3-protobuf
# What the test suite needs beyond that: PyTorch for the torch execution backend's tests (cli_execute_torch,
# cli_torch_builder), which fail without it.
TEST_DEBS := python3-torch

# Real PyTorch profiler traces whose import rate `make bench` also measures, when the folder exists.
KINETO_DIR ?= ../shared/data/traces/kineto

.PHONY: deps build demo test sanitize fuzz bench bench-allocator crosscheck golden results clean

# Installs the Debian packages in $(1) that are missing (apt-get, as root or through sudo).
define install_debs
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_debs,$(DEBS))

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/ddlsim run experiments/demo.yaml -o results/demo.csv -j $(JOBS)
	$(PYTHON) plots/plot_throughput.py results/demo.csv -o results/demo.png

test: build
	$(call install_debs,$(TEST_DEBS))
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (any report fails the test
# that triggers it). The CUDA targets are left out (their code never runs here); the timed
# cross-check runs without its accuracy bounds, which do not hold for instrumented code.
sanitize: deps
	$(call install_debs,$(TEST_DEBS))
	cmake -S . -B $(BUILD)-sanitize -DCMAKE_BUILD_TYPE=Debug -DDDLSIM_CUDA=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
	cmake --build $(BUILD)-sanitize -j $(JOBS)
	cd $(BUILD)-sanitize && DDLSIM_SANITIZED=1 ctest --output-on-failure -j $(JOBS)

# The libFuzzer targets of the input loaders (tests/fuzz), FUZZ_SECONDS each, JOBS at a time, in a
# clang build with ASan + UBSan. A finding stops its target and is saved under $(BUILD)-fuzz/fuzz/crashes.
FUZZ_SECONDS ?= 600
FUZZ_DEBS := clang libclang-rt-14-dev
fuzz: deps
	$(call install_debs,$(FUZZ_DEBS))
	CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDLSIM_FUZZ=ON \
	  -DDDLSIM_CUDA=OFF -DDDLSIM_BUILD_TESTS=OFF
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target ddlsim_fuzzers
	FUZZ_JOBS=$(JOBS) tests/fuzz/run_fuzzers.sh $(BUILD)-fuzz $(FUZZ_SECONDS)

crosscheck: build
	$(BUILD)/bin/ddlsim execute experiments/crosscheck_host.yaml --backend host -o results/crosscheck_host.csv
	$(PYTHON) plots/plot_crosscheck.py results/crosscheck_host.csv -o results/crosscheck_host.png

# The golden results (tests/golden/, docs/testing.md#golden-results) written again from this build: every
# shipped experiment and bench point, or those named in GOLDEN, each run twice (not written if they differ).
golden: build
	$(PYTHON) tests/cli/test_golden.py $(BUILD)/bin/ddlsim --update $(GOLDEN)

# The seed studies' figures and tables (docs/results.md): every shipped seed experiment and search.
results: build
	$(BUILD)/bin/ddlsim run experiments/demo.yaml -o results/demo.csv -j $(JOBS) --quiet
	$(PYTHON) plots/plot_throughput.py results/demo.csv -o docs/figures/demo.png
	$(BUILD)/bin/ddlsim run experiments/gpipe_bm.yaml -o results/gpipe_bm.csv -j $(JOBS) --quiet
	$(PYTHON) plots/plot_bm.py results/gpipe_bm.csv -o docs/figures/gpipe_bm.png
	$(BUILD)/bin/ddlsim run experiments/gpipe_bm.yaml -o results/gantt.csv --quiet --trace-dir results/timeline \
	  --set sweep.parallelism.pp=[4] --set sweep.training.micro_batch=[16]
	$(PYTHON) plots/plot_gantt.py results/timeline/gpipe_bm_0.json -o docs/figures/gantt_gpipe_k4.png
	$(BUILD)/bin/ddlsim search microbatch experiments/microbatch_search.yaml --max-batch 16384 -j $(JOBS) \
	  -o results/microbatch_search.csv | tee results/microbatch_search.txt
	$(PYTHON) plots/plot_memory.py results/microbatch_search.csv --global-batch 2048 --global-batch 4096 \
	  --global-batch 8192 -o docs/figures/microbatch_memory.png
	$(BUILD)/bin/ddlsim run experiments/grid_shapes.yaml -o results/grid_shapes.csv -j $(JOBS) --quiet
	$(PYTHON) plots/plot_grid.py results/grid_shapes.csv -o docs/figures/grid_shapes.png
	$(BUILD)/bin/ddlsim run experiments/llama3_recipes.yaml -o results/llama3_recipes.csv -j $(JOBS) --quiet
	$(PYTHON) plots/plot_recipes.py results/llama3_recipes.csv -o docs/figures/llama3_recipes.png
	$(BUILD)/bin/ddlsim run experiments/moe.yaml -o results/moe.csv -j $(JOBS) --quiet
	$(PYTHON) plots/plot_moe.py results/moe.csv -o docs/figures/moe.png
	for e in parallelism_compare normalization sync_async; do \
	  $(BUILD)/bin/ddlsim run experiments/$$e.yaml -o results/$$e.csv -j $(JOBS) --quiet || exit 1; done

# Every scenario of `ddlsim bench --list` (sweeps at -j 1 and -j 2), and the traces in KINETO_DIR,
# medians of 3 -> results/bench.csv; then docs/performance.md from it, which also says how far the
# figures moved since the previous run (kept as results/bench-previous.csv).
# Scenarios too long to repeat (the 1,000-point sweep: a quarter of an hour; the unfolded ZeRO 0
# point's bare SimGrid DAG: a minute and a half; the 10,000-point constant sweep: about a minute):
# once, and a sweep at -j 2 only.
BENCH_ONCE := llama3-405b-16k-sweep llama3-405b-16k-zero0-unfolded sweep-constant-10000
bench: build
	mkdir -p results && if [ -f results/bench.csv ]; then mv results/bench.csv results/bench-previous.csv; fi
	cp /proc/loadavg results/bench-loadavg.txt 2>/dev/null || rm -f results/bench-loadavg.txt
	$(BUILD)/bin/ddlsim bench --list | while read -r name kind rest; do \
	  repeat=3; if [ "$$kind" = sweep ]; then set -- -j1 -j2; else set -- ""; fi; \
	  case " $(BENCH_ONCE) " in *" $$name "*) repeat=1; if [ "$$kind" = sweep ]; then set -- -j2; fi;; esac; \
	  for jobs in "$$@"; do \
	    $(BUILD)/bin/ddlsim bench $$name $$jobs --repeat $$repeat -o results/bench.csv </dev/null || exit 1; \
	  done; \
	done
	if ls $(KINETO_DIR)/*.json* >/dev/null 2>&1; then \
	  $(BUILD)/bin/ddlsim bench import $(KINETO_DIR)/*.json* --repeat 3 -o results/bench.csv; \
	else echo "no traces in $(KINETO_DIR): the real-trace import rates are left out"; fi
	$(PYTHON) bench/performance_md.py results/bench.csv --build $(BUILD) --previous results/bench-previous.csv \
	  --loadavg results/bench-loadavg.txt --glibc results/bench-glibc.csv --glibc-peer results/bench-tcmalloc.csv \
  -o docs/performance.md

# The allocator's share (docs/performance.md, "The allocator"): a few scenarios again with glibc's
# malloc ($(BUILD)-glibc, -DDDLSIM_TCMALLOC=OFF) -> results/bench-glibc.csv, each followed by this
# build's run of it -> results/bench-tcmalloc.csv, which `make bench` then puts side by side.
ALLOCATOR_SCENARIOS := gpt3-175b-1024 gpt3-13b-64-flow llama3-405b-131k llama3-405b-16k-zero0-unfolded
bench-allocator: build
	cmake -S . -B $(BUILD)-glibc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDLSIM_TCMALLOC=OFF -DDDLSIM_CUDA=OFF \
	  -DDDLSIM_BUILD_TESTS=OFF
	cmake --build $(BUILD)-glibc -j $(JOBS) --target ddlsim
	mkdir -p results && rm -f results/bench-glibc.csv results/bench-tcmalloc.csv
	for name in $(ALLOCATOR_SCENARIOS); do \
	  $(BUILD)-glibc/bin/ddlsim bench $$name --repeat 3 --no-compare -o results/bench-glibc.csv </dev/null || exit 1; \
	  $(BUILD)/bin/ddlsim bench $$name --repeat 3 --no-compare -o results/bench-tcmalloc.csv </dev/null || exit 1; \
	done

clean:
	rm -rf $(BUILD)
