# The README's two set-up commands, on a fresh Debian 12 machine as root:
#   make demo   install missing packages, build, run experiments/demo.yaml -> results/demo.csv + results/demo.png
#   make test   install missing packages, build, run the whole CTest suite (unit, sim, cli)
#   (make sanitize: the suite again under ASan + UBSan; CI runs both)
# Other targets: deps (packages only), build, bench (every bench/ scenario, medians of 3 ->
# results/bench.csv), crosscheck (experiments/crosscheck_host.yaml simulated and run on this CPU ->
# results/crosscheck_host.csv + .png), clean. BUILD=dir and JOBS=n override the defaults.

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Debian's own interpreter, which sees python3-matplotlib (another python3 may come first on PATH).
PYTHON := /usr/bin/python3
DEBS := build-essential cmake pkg-config git libsimgrid-dev libboost-graph-dev libyaml-cpp-dev doctest-dev zlib1g-dev libopenblas-dev libopenmpi-dev \
        python3 python3-matplotlib

BENCH := resnet50-dp64 gpt3-13b-64-flow gpt3-175b-1024 gpt3-175b-8192

.PHONY: deps build demo test sanitize bench crosscheck results clean

deps:
	@missing=""; for p in $(DEBS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/ddlsim run experiments/demo.yaml -o results/demo.csv -j $(JOBS)
	$(PYTHON) plots/plot_throughput.py results/demo.csv -o results/demo.png

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (any report fails the test
# that triggers it). The CUDA targets are left out (their code never runs here), and so is the timed
# cross-check, whose error bound does not hold for instrumented code.
sanitize: deps
	cmake -S . -B $(BUILD)-sanitize -DCMAKE_BUILD_TYPE=Debug -DDDLSIM_CUDA=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
	cmake --build $(BUILD)-sanitize -j $(JOBS)
	cd $(BUILD)-sanitize && ctest --output-on-failure -j $(JOBS) -E cli_execute

crosscheck: build
	$(BUILD)/bin/ddlsim execute experiments/crosscheck_host.yaml --backend host -o results/crosscheck_host.csv
	$(PYTHON) plots/plot_crosscheck.py results/crosscheck_host.csv -o results/crosscheck_host.png

# The seed studies' figures and tables (docs/results.md): every shipped seed experiment and search.
results: build
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
	for e in parallelism_compare normalization sync_async; do \
	  $(BUILD)/bin/ddlsim run experiments/$$e.yaml -o results/$$e.csv -j $(JOBS) --quiet || exit 1; done

bench: build
	rm -f results/bench.csv
	for s in $(BENCH); do $(BUILD)/bin/ddlsim bench $$s --repeat 3 -o results/bench.csv || exit 1; done

clean:
	rm -rf $(BUILD)
