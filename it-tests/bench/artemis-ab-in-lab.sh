#!/bin/bash
# Runs inside the Soft-RoCE lab (started by artemis-ab): PASSES passes, each running artemis-bench's driver once per
# build (ARTEMIS_AB_BUILDS: name=file holding that build's class path), the builds' order rotated every pass, each run
# into a folder NAME-passP of its own. A run that fails is said and the others go on; artemis-ab sums up after.
set -uo pipefail
out="${RDMA_LAB_RESULTS:-/tmp}"
exec > >(tee -a "$out/artemis-ab.txt") 2>&1
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
read -r -a jvm_opts <<<"${ARTEMIS_AB_JVM_OPTS:--Xmx2g}"
export DELIVERY="${DELIVERY:-nonpersistent}" PAIRS="${PAIRS:-1}" ROUNDS="${ROUNDS:-3}"
read -r -a builds <<<"$ARTEMIS_AB_BUILDS"
passes="${PASSES:-2}"
echo "artemis-ab: $(date -u '+%Y-%m-%d %H:%M UTC'), $passes passes of ${#builds[@]} builds, DELIVERY='$DELIVERY'" \
  "PAIRS='$PAIRS' ROUNDS=$ROUNDS; clients: ${jvm_opts[*]}; broker: ${BROKER_JVM_OPTS:-}"
for p in $(seq 1 "$passes"); do
  for i in $(seq 0 $((${#builds[@]} - 1))); do
    entry="${builds[$(((i + p - 1) % ${#builds[@]}))]}"
    name="${entry%%=*}"; dir="$out/$name-pass$p"
    mkdir -p "$dir"
    echo "pass $p, build $name: $(date -u '+%H:%M:%S')"
    RDMA_LAB_RESULTS="$dir" "$java_bin" "${jvm_opts[@]}" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$(cat "${entry#*=}")" dev.artemisrdma.it.bench.ArtemisTransportBenchmark > "$dir/artemis-bench-output.txt" 2>&1
    rc=$?
    if [ $rc != 0 ] || [ ! -s "$dir/artemis-rounds.csv" ]; then
      echo "pass $p, build $name: FAILED (exit $rc), see $name-pass$p/artemis-bench-output.txt:"
      tail -5 "$dir/artemis-bench-output.txt"
      continue
    fi
    # the run's own table of rounds, and what its RDMA client transport did
    grep -E '^(delivery|[a-z]+persistent),' "$dir/artemis-rounds.csv" | sed 's/^/  /'
    grep -E 'RDMA client transport|JIT settled|WARMUP_SECONDS' "$dir/artemis-bench-output.txt" | sed 's/^/  /'
  done
done
