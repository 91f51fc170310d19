#!/usr/bin/env bash
# Coverage-guided fuzzing of one target of tests/fuzz/ with libFuzzer (clang), under ASan+UBSan.
#   tools/fuzz.sh TARGET SECONDS   fuzz TARGET (gguf_fuzz, tokenizer_fuzz, store_fuzz,
#                                  prr_profile_fuzz) for SECONDS
#                                  on a copy of tests/fuzz/corpus/TARGET in build-fuzz/work/TARGET
#                                  (new inputs stay there; the committed corpus is not touched);
#                                  crashes go to build-fuzz/artifacts/TARGET/
#   tools/fuzz.sh --all SECONDS    every target for SECONDS, as many at once as there are cores
#                                  (each libFuzzer process runs on one); fails if any target does
#   tools/fuzz.sh --seeds          write fresh seeds (make_fuzz_seeds) and minimise each target's
#                                  into tests/fuzz/corpus/TARGET (-merge=1 into an empty dir)
# To merge what a run found into the committed corpus:
#   build-fuzz/tests/fuzz/TARGET -merge=1 tests/fuzz/corpus/TARGET build-fuzz/work/TARGET
# CC and CXX choose the compiler (default clang and clang++, which must ship libFuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-fuzz
targets="gguf_fuzz tokenizer_fuzz store_fuzz prr_profile_fuzz"
usage() { echo "usage: $0 TARGET SECONDS | --seeds   (TARGET: $targets)" >&2; exit 2; }
[ $# -ge 1 ] || usage

# Configured once (so several targets may be fuzzed at once from one build); delete build-fuzz
# to reconfigure. The library is instrumented for coverage too (fuzzer-no-link), not only the
# targets.
if ! grep -q '^SA_FUZZ:BOOL=ON' "$dir/CMakeCache.txt" 2>/dev/null; then
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSA_FUZZ=ON -DSA_SANITIZE=ON -DSA_CUDA=OFF -DSA_VULKAN=OFF -DSA_BUILD_APPS=OFF \
    -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs=$(nproc 2>/dev/null || echo 2)

if [ "$1" = "--seeds" ]; then
  # shellcheck disable=SC2086
  cmake --build "$dir" -j "$jobs" --target make_fuzz_seeds $targets
  seeds=$(mktemp -d)
  trap 'rm -rf "$seeds"' EXIT
  "$dir/tests/fuzz/make_fuzz_seeds" "$seeds"
  for t in $targets; do
    rm -rf "tests/fuzz/corpus/$t" && mkdir -p "tests/fuzz/corpus/$t"
    "$dir/tests/fuzz/$t" -merge=1 "tests/fuzz/corpus/$t" "$seeds/$t" 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files"
    du -sh "tests/fuzz/corpus/$t"
  done
  exit 0
fi

# fuzz TARGET SECONDS: one built target on a copy of its corpus; its exit status is libFuzzer's.
fuzz() {
  local target=$1 seconds=$2
  local work="$dir/work/$target" artifacts="$dir/artifacts/$target/"
  mkdir -p "$work" "$artifacts"
  cp -n "tests/fuzz/corpus/$target"/* "$work"/ 2>/dev/null || true
  local extra=()
  [ "$target" = gguf_fuzz ] && extra+=(-dict=tests/fuzz/gguf.dict)
  local log="$dir/work/$target.log" rc
  set +e
  "$dir/tests/fuzz/$target" "$work" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "${extra[@]}" 2>&1 | tee "$log" |
    grep -E "^#[0-9]+[[:space:]]+(INITED|DONE|pulse|NEW)|ERROR|SUMMARY|Test unit written" | tail -n 25
  rc=${PIPESTATUS[0]}
  set -e
  echo "---- $target: $seconds s, exit $rc"
  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)" "$log" | tail -n 2
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "$log" || true
  ls "$artifacts" 2>/dev/null | sed "s|^|crash input: $artifacts|"
  return "$rc"
}

if [ "$1" = "--all" ]; then
  [ $# -eq 2 ] || usage
  # shellcheck disable=SC2086
  cmake --build "$dir" -j "$jobs" --target $targets
  mkdir -p "$dir/work"
  failed=0 pids=() names=()
  for t in $targets; do
    fuzz "$t" "$2" > "$dir/work/$t.summary" 2>&1 &
    pids+=($!) names+=("$t")
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || failed=1
      cat "$dir/work/${names[0]}.summary"
      pids=("${pids[@]:1}") names=("${names[@]:1}")
    fi
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed=1
    cat "$dir/work/${names[$i]}.summary"
  done
  exit "$failed"
fi

[ $# -eq 2 ] || usage
target=$1
case " $targets " in *" $target "*) ;; *) usage ;; esac
cmake --build "$dir" -j "$jobs" --target "$target"
fuzz "$target" "$2"
