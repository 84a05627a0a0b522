#!/usr/bin/env bash
# The GPU session in three steps: measure a real GPU and compare it with the simulator (docs/gpu.md).
#
#   calibration/gpu_session.sh prepare            # here, with ddlsim built: the cross-check's workloads
#   calibration/gpu_session.sh measure            # on the GPU machine, one call (needs CUDA, cmake, a C++ compiler)
#   calibration/gpu_session.sh finish [ARCHIVE]   # here: fit the profile, simulate, compare, write the tables
#   calibration/gpu_session.sh all                # the three in a row, on a GPU machine that has ddlsim built
#
# prepare  writes results/gpu-session/ (git-ignored: name it in the device call's `carry`): the workload of every
#          point of experiments/crosscheck_gpu.yaml (GPT-2 small and ResNet-50, micro-batch 1 to 64, one GPU),
#          as `ddlsim execute --prepare` writes them, and the commit they come from.
# measure  needs none of ddlsim's Debian packages (no SimGrid, yaml-cpp, Boost): it builds ddlsim-collect and
#          ddlsim-run-cuda on their own (sim/backends/cuda with DDLSIM_BUILD_COLLECT=ON), finding cuDNN and NCCL in
#          the CUDA toolkit, the system, or the Python wheels (nvidia-cudnn-*, nvidia-nccl-*) that PyTorch brings;
#          records the GPU (nvidia-smi); runs every workload with ddlsim-run-cuda, replayed as a CUDA graph
#          (measured-<i>.json; its two traced replays, one record per kernel: trace-graph-<i>.jsonl) and issued eagerly (measured-eager-<i>.json: 5 timed iterations after 1 warm-up,
#          then 2 traced with CUPTI); then the collector on every launch of the workloads at its exact shape and the
#          quick plan (--workloads-first --time-limit), and on the launches alone with their operands left in the
#          L2 (--workloads-only --l2 warm: records-warm.jsonl), in the time left; and packs everything into
#          $OUT/gpu-session.tar.gz and its CUPTI traces into gpu-traces.tar.gz and gpu-graph-traces.tar.gz beside it
#          (or in results/), again
#          after each step, so that a run stopped at its time limit still brings back what it finished. It changes
#          no GPU setting (clocks are recorded, not locked). 2.5 to 3 minutes on one H200.
# finish   unpacks the archive (and the traces' archives beside it) into results/gpu-session/, fits
#          calibration/profiles/<gpu>-measured.yaml on top of the spec-sheet profile of that GPU (`ddlsim calibrate
#          fit`: device, driver, CUDA, cuDNN and NCCL versions, clocks at the start and end, date, commit),
#          simulates the cross-check with it (an H200 on sim/clusters/h200-1gpu.yaml), pairs each
#          point with its measured time (`ddlsim execute --measured`: results/crosscheck_gpu.csv), and writes
#          results/crosscheck_gpu.md (each point's simulated and measured time and memory, the MAPE, each step's
#          kernels summed cold and warm: plots/crosscheck_l2.py; each step's kernels inside its CUDA graph against
#          the microbenchmarks: plots/crosscheck_graph.py) and
#          results/crosscheck_gpu.png (with python3-matplotlib), for docs/crosscheck-gpu.md.
#
# Environment: DDLSIM (the ddlsim binary, default build/bin/ddlsim), SESSION (default results/gpu-session),
# PROFILE_DIR (default calibration/profiles), RESULTS (default results), FETCH_DEBS (default 1; 0: prepare
# downloads no .deb), CUDA_GRAPH (default 1: each step timed as a CUDA graph replay and eagerly; 0: eagerly
# only), DEADLINE (measure's budget in seconds from its start, default 540 for a 600 s device call: each run of a
# workload gets at most half of what is left once 90 s are kept for the collector, which starts no point later
# than 45 s before the deadline), GPU_BUILD (default build-gpu), JOBS (build jobs, default: all cores),
# CUDNN_ROOT / NCCL_HOME (where to look first), CUDA_ARCHITECTURES (default native: the GPU there), EXPERIMENT
# (default experiments/crosscheck_gpu.yaml).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
ddlsim=${DDLSIM:-$root/build/bin/ddlsim}
session=${SESSION:-results/gpu-session}
gpu_build=${GPU_BUILD:-build-gpu}
experiment=${EXPERIMENT:-experiments/crosscheck_gpu.yaml}
profiles=${PROFILE_DIR:-calibration/profiles}
results=${RESULTS:-results}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
deadline=${DEADLINE:-540}

say() { echo "gpu_session: $*" >&2; }
die() { say "error: $*"; exit 1; }

need_ddlsim() {
  [ -x "$ddlsim" ] || die "$ddlsim is not built: build ddlsim first (README), or set DDLSIM"
}

cmd_prepare() {
  need_ddlsim
  rm -rf "$session"
  mkdir -p "$session"
  "$ddlsim" execute "$experiment" --backend cuda --prepare "$session" >&2
  git -C "$root" rev-parse HEAD >"$session/commit" 2>/dev/null || echo unknown >"$session/commit"
  if ! git -C "$root" diff --quiet HEAD 2>/dev/null; then
    echo "$(cat "$session/commit")+uncommitted" >"$session/commit"
  fi
  cp "$experiment" "$session/experiment.yaml"
  # The GPU machine has none of our Debian packages: the JSON reader the GPU tools share with ddlsim
  # (traces/Json.cpp) needs simdjson, so its two packages travel along, unpacked there with dpkg -x.
  # FETCH_DEBS=0 skips it (the tests, which download nothing).
  if [ "${FETCH_DEBS:-1}" != 0 ]; then
    mkdir -p "$session/debs"
    (cd "$session/debs" && apt-get download libsimdjson-dev libsimdjson14 >/dev/null 2>&1) ||
      say "warning: could not download libsimdjson-dev and libsimdjson14 (apt-get download): measure needs simdjson there"
  fi
  say "prepared $(ls "$session"/workload-*.json | wc -l) workload(s) in $session (commit $(cat "$session/commit"))"
  say "next, on the GPU machine: calibration/gpu_session.sh measure   (carry $session)"
}

# The first file matching one of the names under the given roots, searched a few folders deep.
find_first() {
  local depth=$1
  shift
  local names=() roots=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
  shift || true
  roots=("$@")
  local r n f
  for r in "${roots[@]}"; do
    [ -d "$r" ] || continue
    for n in "${names[@]}"; do
      f=$(find -L "$r" -maxdepth "$depth" -name "$n" \( -type f -o -type l \) 2>/dev/null | sort | head -n 1)
      if [ -n "$f" ]; then
        echo "$f"
        return 0
      fi
    done
  done
  return 1
}

# Where PyTorch's wheels keep a library: site-packages/nvidia/<name>.
wheel_dirs() {
  local py
  for py in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - <<'EOF' 2>/dev/null || true
import os, site, sys
paths = set(site.getsitepackages() + [site.getusersitepackages()] + sys.path)
for p in sorted(paths):
    d = os.path.join(p, "nvidia")
    if os.path.isdir(d):
        print(d)
EOF
  done | sort -u
}

cmd_measure() {
  [ -d "$session" ] && ls "$session"/workload-*.json >/dev/null 2>&1 ||
    die "$session has no workloads: run 'calibration/gpu_session.sh prepare' where ddlsim is built, and carry $session"
  local out_dir=${OUT:-$root/results}
  mkdir -p "$out_dir"
  local archive=$out_dir/gpu-session.tar.gz
  local log=$session/session.log
  : >"$log"
  exec 3>&2
  exec 2> >(tee -a "$log" >&3)
  # Two archives, so that each stays under what a device call brings back (16 MiB a file): the session without
  # the CUPTI traces of the cross-check, and those traces, which only the cross-check's CSV reads.
  pack() {
    tar -czf "$archive" --exclude='trace-*.jsonl' --exclude=debs --exclude=deps \
      -C "$(dirname "$session")" "$(basename "$session")" 2>/dev/null || true
    if ls "$session"/trace-[0-9]*.jsonl >/dev/null 2>&1; then
      (cd "$(dirname "$session")" && tar -czf "$out_dir/gpu-traces.tar.gz" "$(basename "$session")"/trace-[0-9]*.jsonl) 2>/dev/null || true
    fi
    if ls "$session"/trace-graph-*.jsonl >/dev/null 2>&1; then
      (cd "$(dirname "$session")" && tar -czf "$out_dir/gpu-graph-traces.tar.gz" "$(basename "$session")"/trace-graph-*.jsonl) 2>/dev/null || true
    fi
  }
  local start=$SECONDS

  say "step 1/4: the machine"
  { date -u +%Y-%m-%dT%H:%M:%SZ; uname -a; nvidia-smi 2>&1 || true; } >"$session/machine.txt"
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,clocks.applications.graphics,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active,persistence_mode --format=csv \
    >"$session/clocks-start.csv" 2>&1 || true
  nvidia-smi -q -d CLOCK,PERFORMANCE,POWER >"$session/nvidia-smi-q.txt" 2>&1 || true
  pack

  say "step 2/4: build ddlsim-collect and ddlsim-run-cuda on their own"
  local nvcc
  nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || nvcc=$(find_first 3 nvcc -- /usr/local/cuda/bin /usr/local /opt) || die "no nvcc: the CUDA toolkit is needed"
  export PATH=$(dirname "$nvcc"):$PATH
  local toolkit
  toolkit=$(cd "$(dirname "$nvcc")/.." && pwd)
  mapfile -t wheels < <(wheel_dirs)
  local roots=(${CUDNN_ROOT:-} ${NCCL_HOME:-} "$toolkit" /usr/include /usr/lib/x86_64-linux-gnu /usr/local /opt "${wheels[@]}")
  local cudnn_h nccl_h cudnn_so nccl_so cupti_so
  cudnn_h=$(find_first 6 cudnn.h -- "${roots[@]}") || die "no cudnn.h (install cuDNN 9, or set CUDNN_ROOT)"
  nccl_h=$(find_first 6 nccl.h -- "${roots[@]}") || die "no nccl.h (install NCCL, or set NCCL_HOME)"
  cudnn_so=$(find_first 6 libcudnn.so libcudnn.so.9 -- "$(dirname "$cudnn_h")/.." "${roots[@]}") || die "no libcudnn.so"
  nccl_so=$(find_first 6 libnccl.so libnccl.so.2 -- "$(dirname "$nccl_h")/.." "${roots[@]}") || die "no libnccl.so"
  local arch=${CUDA_ARCHITECTURES:-}
  if [ -z "$arch" ]; then # the GPU there, when one answers; else Ampere and Hopper
    if nvidia-smi -L >/dev/null 2>&1; then arch=native; else arch="80;90"; fi
  fi
  # simdjson: the system's, else the packages prepare brought (unpacked next to the session).
  local simdjson_prefix=""
  if [ ! -e /usr/lib/x86_64-linux-gnu/cmake/simdjson/simdjson-config.cmake ] && ls "$session"/debs/*.deb >/dev/null 2>&1; then
    simdjson_prefix=$(cd "$session" && pwd)/deps
    for deb in "$session"/debs/*.deb; do dpkg -x "$deb" "$simdjson_prefix"; done
  fi
  local cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DDDLSIM_BUILD_COLLECT=ON
                    -DDDLSIM_CUDNN_INCLUDE_DIR="$(dirname "$cudnn_h")" -DDDLSIM_CUDNN_LIBRARY="$cudnn_so"
                    -DDDLSIM_NCCL_INCLUDE_DIR="$(dirname "$nccl_h")" -DDDLSIM_NCCL_LIBRARY="$nccl_so"
                    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
  # CUPTI: the toolkit's, else a wheel's.
  if ! find_first 4 libcupti.so -- "$toolkit" >/dev/null; then
    cupti_so=$(find_first 6 libcupti.so libcupti.so.13 libcupti.so.12 -- "${wheels[@]}") || die "no libcupti.so"
    cmake_args+=(-DCUDA_cupti_LIBRARY="$cupti_so")
  fi
  if [ -n "$simdjson_prefix" ]; then
    cmake_args+=(-Dsimdjson_DIR="$simdjson_prefix/usr/lib/x86_64-linux-gnu/cmake/simdjson")
  fi
  say "CUDA $toolkit, cuDNN $cudnn_so, NCCL $nccl_so${simdjson_prefix:+, simdjson from $simdjson_prefix}"
  local libdirs
  libdirs=$(dirname "$cudnn_so"):$(dirname "$nccl_so")${cupti_so:+:$(dirname "$cupti_so")}
  libdirs=$libdirs${simdjson_prefix:+:$simdjson_prefix/usr/lib/x86_64-linux-gnu}
  export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  cmake -S sim/backends/cuda -B "$gpu_build" "${cmake_args[@]}" >"$session/configure.log" 2>&1 ||
    { cat "$session/configure.log" >&2; pack; die "configuring the GPU tools failed"; }
  cmake --build "$gpu_build" -j "$jobs" >"$session/build.log" 2>&1 ||
    { tail -n 40 "$session/build.log" >&2; pack; die "building the GPU tools failed"; }
  say "built in $((SECONDS - start)) s"
  pack

  # The step's measurements first (they are the cross-check), then the microbenchmarks in the time left: the
  # workloads' own launches before the quick plan's grid, so that the time limit cuts the grid.
  say "step 3/4: the cross-check's workloads, one after the other"
  local i
  for w in "$session"/workload-*.json; do
    i=${w##*/workload-}
    i=${i%.json}
    # Each run gets at most half of what is left once 90 s are kept for the collector, and 90 s at most.
    local run_limit=$(((deadline - (SECONDS - start) - 90) / 2))
    [ "$run_limit" -le 90 ] || run_limit=90
    if [ "$run_limit" -lt 15 ]; then
      say "warning: workload $i not run: $((SECONDS - start)) s of the ${deadline} s budget are spent"
      continue
    fi
    # With CUDA_GRAPH=1 (the default) the step is timed twice: replayed as one CUDA graph (measured-<i>.json, the
    # GPU's time, which the simulator predicts) and issued eagerly by the host (measured-eager-<i>.json, with
    # its CUPTI trace), as PyTorch without graphs runs it.
    local eager_out=$session/measured-$i.json
    if [ "${CUDA_GRAPH:-1}" != 0 ]; then
      eager_out=$session/measured-eager-$i.json
      # Traced too (trace-graph-<i>.jsonl); should the tracing fail, the step is timed again without it.
      timeout "$run_limit" "$gpu_build/bin/ddlsim-run-cuda" "$w" -o "$session/measured-$i.json" --warmup 2 --iterations 5 \
        --cuda-graph --trace "$session/trace-graph-$i.jsonl" ||
        { say "warning: workload $i failed as a traced CUDA graph (status $?): again without the trace"
          timeout "$run_limit" "$gpu_build/bin/ddlsim-run-cuda" "$w" -o "$session/measured-$i.json" --warmup 2 \
            --iterations 5 --cuda-graph || say "warning: workload $i failed as a CUDA graph (status $?)"; }
    fi
    timeout "$run_limit" "$gpu_build/bin/ddlsim-run-cuda" "$w" -o "$eager_out" --warmup 1 --iterations 5 \
      --trace "$session/trace-$i.jsonl" || say "warning: workload $i failed (status $?)"
    pack
  done
  say "cross-checked after $((SECONDS - start)) s"

  say "step 4/4: microbenchmarks (the workloads' own launches, then the quick plan)"
  local workloads=()
  for w in "$session"/workload-*.json; do workloads+=(--workload "$w"); done
  # It starts no point after `limit` s and writes what it measured; the timeout, 30 s later, only catches a hang.
  # Two thirds of what is left go to the cold collection (the profile's), the rest to a warm one of the workloads'
  # launches alone (records-warm.jsonl: their operands left in the L2), which finish compares with the steps.
  local commit_text
  commit_text=$(cat "$session/commit" 2>/dev/null || echo unknown)
  local limit=$(((deadline - (SECONDS - start) - 45) * 2 / 3))
  if [ "$limit" -lt 20 ]; then
    say "warning: no microbenchmarks: $((SECONDS - start)) s of the ${deadline} s budget are spent"
  else
    timeout $((limit + 30)) "$gpu_build/bin/ddlsim-collect" --quick --workloads-first --time-limit "$limit" \
      "${workloads[@]}" --provenance "commit=$commit_text" \
      -o "$session/records.jsonl" || say "warning: the collector stopped early (status $?)"
  fi
  say "collected after $((SECONDS - start)) s"
  pack
  limit=$((deadline - (SECONDS - start) - 45))
  if [ "$limit" -lt 20 ]; then
    say "warning: no warm-L2 microbenchmarks: $((SECONDS - start)) s of the ${deadline} s budget are spent"
  else
    timeout $((limit + 30)) "$gpu_build/bin/ddlsim-collect" --workloads-only --l2 warm --time-limit "$limit" \
      "${workloads[@]}" --provenance "commit=$commit_text" \
      -o "$session/records-warm.jsonl" || say "warning: the warm-L2 collector stopped early (status $?)"
    say "collected warm after $((SECONDS - start)) s"
    pack
  fi
  nvidia-smi --query-gpu=name,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv \
    >"$session/clocks-end.csv" 2>&1 || true
  say "measured in $((SECONDS - start)) s; bring back $archive, then: calibration/gpu_session.sh finish"
  pack
}

cmd_finish() {
  need_ddlsim
  local archive=${1:-}
  if [ -n "$archive" ]; then
    [ -f "$archive" ] || die "$archive: no such archive"
    mkdir -p "$(dirname "$session")"
    rm -rf "$session"
    tar -xzf "$archive" -C "$(dirname "$session")"
    local traces
    for traces in "$(dirname "$archive")"/gpu-traces.tar.gz "$(dirname "$archive")"/gpu-graph-traces.tar.gz; do
      if [ -f "$traces" ]; then tar -xzf "$traces" -C "$(dirname "$session")"; fi
    done
  fi
  [ -s "$session/records.jsonl" ] || die "$session/records.jsonl is missing: run measure on the GPU machine first"
  local device
  device=$(python3 -c "
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get('type') == 'provenance' and r.get('device'):
        print(r['device']); break
" "$session/records.jsonl")
  # The spec-sheet profile the fit starts from, and the one-GPU cluster of that GPU (its memory decides which
  # points fit); the experiment's own cluster (h100-1gpu) for any other GPU.
  local base=h100-sxm name=gpu-measured cluster=()
  case "$device" in
    *H200*) base=h200; name=h200-measured; cluster=(--set cluster=h200-1gpu) ;;
    *H100*) base=h100-sxm; name=h100-measured ;;
    *A100*) base=a100-sxm; name=a100-measured ;;
  esac
  mkdir -p "$profiles" "$results"
  local profile=$profiles/$name.yaml
  say "$device: fitting $profile on top of $base"
  "$ddlsim" calibrate fit "$session/records.jsonl" --base "$base" -o "$profile" >&2
  local csv=$results/crosscheck_gpu.csv
  "$ddlsim" execute "$experiment" --backend cuda --measured "$session" --set "calibration=$profile" ${cluster[@]+"${cluster[@]}"} \
    -o "$csv" >&2 || true
  [ -s "$csv" ] || die "no cross-check CSV was written"
  python3 plots/crosscheck_table.py "$csv" --profile "$profile" --session "$session" -o "$results/crosscheck_gpu.md"
  {
    printf '\n## Kernels cold and warm\n\n'
    python3 plots/crosscheck_l2.py "$session"
  } >>"$results/crosscheck_gpu.md" || say "warning: no table of the kernels cold and warm (status $?)"
  if ls "$session"/trace-graph-*.jsonl >/dev/null 2>&1; then
    {
      printf '\n## The steps inside their CUDA graph\n\n'
      python3 plots/crosscheck_graph.py "$session"
    } >>"$results/crosscheck_gpu.md" || say "warning: no table of the steps inside their graph (status $?)"
  fi
  python3 plots/plot_crosscheck.py "$csv" -o "$results/crosscheck_gpu.png" --title "$device: simulated vs measured" \
    >/dev/null 2>&1 || say "no figure (python3-matplotlib is missing)"
  say "wrote $profile, $csv and $results/crosscheck_gpu.md: copy the table into docs/crosscheck-gpu.md"
}

case "${1:-}" in
  prepare) cmd_prepare ;;
  measure) cmd_measure ;;
  finish) shift; cmd_finish "${1:-}" ;;
  all) cmd_prepare; cmd_measure; cmd_finish ;;
  -h|--help|help|"") sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' ;;
  *) die "unknown step '$1' (prepare, measure, finish, all)" ;;
esac
