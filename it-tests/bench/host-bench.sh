# Sourced by artemis-host-bench and transport-host-bench, not run: what the benchmarks on the host (no lab) share.
#
# host_bench_prepare FINAL
#   Builds the connector and it-tests with the reactor (test-compile, no install; BUILD=0 skips it, with the caller's
#   mvn_args array), writes it-tests' test class path once, and sets for the caller: final (FINAL, where the results
#   go at the end), results (FINAL.partial, emptied: a run waiting for the lock, or one that fails, leaves the last
#   results where they were), cp (a copy of the classes as built now, so that a build during the wait for the lock or
#   during the run changes nothing measured: the connector's main classes, or CONNECTOR_CLASSES, its test classes,
#   it-tests' test classes; then the third-party jars) and java_bin. The copy is removed when the caller exits.
# host_bench_measure NAME OUTPUT HEADER COMMAND...
#   Prints NAME's header line (date, commit, HEADER, CPUs, load) and runs COMMAND, holding the lab lock
#   /tmp/artemis-rdma-lab.lock unless LOCK=0, everything to the terminal and OUTPUT, then how long it took.
# host_bench_finish
#   Moves the results into their place.
host_bench_prepare() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  final="$1"
  if [ "${BUILD:-1}" != 0 ]; then
    # the jpms/felix copies need packaged jars (a lab test concern): skipped, they play no part here
    mvn -B -q -o "${mvn_args[@]}" test-compile -pl artemis-rdma-connector,it-tests -Dmdep.skip=true
  fi
  source "$root/it-tests/bench/classpath.sh"
  if [ "${BUILD:-1}" != 0 ] || [ ! -s "$root/it-tests/target/host-bench-cp.txt" ]; then
    bench_classpath test it-tests "$root/it-tests/target/host-bench-cp.txt"
  fi
  # third-party jars only: the connector's classes come from this working tree's target folders
  local deps
  deps="$(tr ':' '\n' <"$root/it-tests/target/host-bench-cp.txt" | grep -v '/dev/artemisrdma/' | paste -sd: -)"
  results="$final.partial"
  rm -rf "$results"; mkdir -p "$results"
  host_bench_classes="$(mktemp -d "$root/it-tests/target/host-bench-classes.XXXXXX")"
  trap 'rm -rf "$host_bench_classes"' EXIT
  cp -r "${CONNECTOR_CLASSES:-$root/artemis-rdma-connector/target/classes}" "$host_bench_classes/connector"
  cp -r "$root/artemis-rdma-connector/target/test-classes" "$host_bench_classes/connector-tests"
  cp -r "$root/it-tests/target/test-classes" "$host_bench_classes/it-tests"
  cp="$host_bench_classes/connector:$host_bench_classes/connector-tests:$host_bench_classes/it-tests:$deps"
  java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
}

host_bench_measure() {
  local name="$1" output="$2" header="$3"
  shift 3
  echo "$name: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null ||
    echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), $header," \
    "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$output"
  local start
  start=$(date +%s)
  if [ "${LOCK:-1}" = 1 ]; then
    flock /tmp/artemis-rdma-lab.lock "$@" 2>&1 | tee -a "$output"
  else
    "$@" 2>&1 | tee -a "$output"
  fi
  echo "$name: measured in $(( $(date +%s) - start )) s" | tee -a "$output"
}

host_bench_finish() {
  rm -rf "$final"; mv "$results" "$final"
}
