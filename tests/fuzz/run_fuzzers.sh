#!/usr/bin/env bash
# Runs the libFuzzer targets of a -DDDLSIM_FUZZ=ON build (`make fuzz` builds it and calls this).
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]     (default: every target)
# Each target starts from its seed corpus (tests/fuzz/CMakeLists.txt lists it) and the inputs kept
# in tests/fuzz/regressions/TARGET, grows its own corpus in BUILD_DIR/fuzz/corpus/TARGET, and runs
# for SECONDS. A crash, sanitizer report, leak, input slower than FUZZ_TIMEOUT (10 s) or allocation
# over FUZZ_MALLOC_MB (2048 MB) stops it and leaves the input in BUILD_DIR/fuzz/crashes/: copy it
# into tests/fuzz/regressions/TARGET once fixed, so that CTest replays it for ever. FUZZ_JOBS
# targets run at once (default 1). Exit 1 when any target failed; a line per target either way.
set -uo pipefail
build=${1:?usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
manifest=$build/tests/fuzz/targets.txt
[ -f "$manifest" ] || { echo "run_fuzzers: $manifest missing: configure $build with -DDDLSIM_FUZZ=ON" >&2; exit 2; }
mkdir -p "$build/fuzz/crashes" "$build/fuzz/logs"

run_one() {  # name seed...
  local name=$1; shift
  local corpus=$build/fuzz/corpus/$name log=$build/fuzz/logs/$name.log dict=$here/yaml.dict
  case $name in kineto|nccl_tests|jsonl|chakra) dict=$here/json.dict ;; esac
  mkdir -p "$corpus"
  for seed in "$@"; do  # seeds are files or folders; libFuzzer wants folders, so copy them in
    if [ -d "$seed" ]; then find "$seed" -maxdepth 1 -type f -exec cp -n {} "$corpus/" \; ; else cp -n "$seed" "$corpus/"; fi
  done
  "$build/bin/fuzz_$name" "$corpus" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" \
    -malloc_limit_mb="${FUZZ_MALLOC_MB:-2048}" -rss_limit_mb="${FUZZ_RSS_MB:-3072}" -dict="$dict" \
    -artifact_prefix="$build/fuzz/crashes/$name-" -print_final_stats=1 >"$log" 2>&1
  local rc=$?
  local execs; execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    printf 'fuzz %-11s ok      %ss, %s runs, corpus %s inputs\n' "$name" "$seconds" "${execs:-?}" "$(ls "$corpus" | wc -l)"
  else
    printf 'fuzz %-11s FAILED  exit %s; see %s and %s\n' "$name" "$rc" "$log" "$build/fuzz/crashes/$name-*"
    grep -m3 -E 'ERROR|SUMMARY|terminate|Test unit written' "$log" | sed 's/^/    /'
  fi
  return $rc
}

failed=0
total=0
running=0
while read -r name seeds; do
  [ -n "$name" ] || continue
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  # shellcheck disable=SC2086  # the seed list is word-split on purpose
  run_one "$name" $seeds &
  running=$((running + 1))
  total=$((total + 1))
  if [ "$running" -ge "${FUZZ_JOBS:-1}" ]; then
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
  fi
done <"$manifest"
while [ "$running" -gt 0 ]; do
  wait -n || failed=$((failed + 1))
  running=$((running - 1))
done
echo "fuzz: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
