#!/bin/bash
# Runs inside the Soft-RoCE lab (started by latency-ab): rounds of ib_send_lat (MODE=lat) or ib_send_bw (MODE=bw),
# then each build's RdmaPerf transport ping-pong or stream; prints every round and, at the end, each build's median
# of the rounds (p50 latency or message rate) against the perftest tool's.
set -uo pipefail
addr="${RDMA_LAB_ADDR1:-10.77.0.2}"
out="${RDMA_LAB_RESULTS:-/tmp}"
exec > >(tee -a "$out/latency-ab.txt") 2>&1
# MTU: the veth pair's MTU for this boot (see lab-mtu.sh)
source "$(dirname "$0")/lab-mtu.sh"
set_lab_mtu || exit 2
echo "latency-ab: $(lab_mtu)"
size="${SIZE:-64}"; rounds="${ROUNDS:-5}"; warmup="${WARMUP:-10000}"; mode="${MODE:-lat}"
settle=()
if [ "${SETTLE:-60}" != 0 ]; then settle=(--settle "${SETTLE:-60}"); fi
# whether the build in $1 (its classes) takes --settle in this mode: the ping-pong since PerfOptions names it; streams
# since TransportHello, which came with them (before it, PerfOptions refused --settle with bw: no RESULT line)
settles_in_mode() {
  local tools="$1/dev/artemisrdma/tools"
  if [ "$mode" = bw ]; then
    [ -f "$tools/TransportHello.class" ]
  else
    grep -q settle "$tools/PerfOptions.class" 2>/dev/null
  fi
}
case "$mode" in
  lat) iters="${ITERS:-50000}"; tool=ib_send_lat; field=5; metric=p50_us ;;   # typical latency, us
  bw) iters="${ITERS:-100000}"; tool=ib_send_bw; field=5; metric=msgs_per_s ;;  # message rate, Mpps
  *) echo "latency-ab: MODE is lat or bw, got '$mode'"; exit 2 ;;
esac
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
deps="$(cat "$LATENCY_AB_DEPS")"
names=(); declare -A cls port opts settles
# OPTS="name=-Dprop=v,-Dprop2=v other=...": JVM options of one build's server and client (e.g. transport settings,
# -Drdmaperf.transport.receiveSlots=256), so one build can run under several settings in one boot
for o in ${OPTS:-}; do opts[${o%%=*}]="$(tr ',' ' ' <<<"${o#*=}")"; done
p=19100
for entry in $LATENCY_AB_BUILDS; do
  name="${entry%%=*}"; names+=("$name"); cls[$name]="${entry#*=}"; port[$name]=$p; p=$((p + 100))
  # a build from before --settle measures after the warm-up's count alone: said, so its figure is read as such
  if [ ${#settle[@]} -gt 0 ]; then
    if settles_in_mode "${cls[$name]}"; then
      settles[$name]="${settle[*]}"
    else
      echo "latency-ab: build $name predates --settle for $mode: it measures after the warm-up's count alone" \
        "(see jit_ms)"
    fi
  fi
  # shellcheck disable=SC2086 # opts are words
  "$java_bin" -Xmx1g ${opts[$name]:-} -cp "$deps:${cls[$name]}" dev.artemisrdma.tools.RdmaPerf server --bind "$addr" \
    --port "${port[$name]}" > "$out/server-$name.log" 2>&1 &
done
sleep 8
echo "latency-ab: $mode, $size B, $rounds rounds of $iters messages ($warmup warm-up${settle[*]:+, then ${settle[*]}}); builds: ${names[*]}"
lat_port=18600
for r in $(seq 1 "$rounds"); do
  lat_port=$((lat_port + 1))
  $tool -R -p $lat_port -s "$size" -n "$iters" >/dev/null 2>&1 &
  lat=$!
  sleep 1
  base="$($tool -R -p $lat_port -s "$size" -n "$iters" "$addr" 2>&1 \
    | awk -v f=$field -v m="$mode" '$1 ~ /^[0-9]+$/ && NF >= 4 {print (m == "bw" ? sprintf("%.0f", $f * 1e6) : $f); exit}')"
  wait $lat
  echo "round $r $tool baseline=$base"
  for name in "${names[@]}"; do
    # each client gets CLIENT_TIMEOUT seconds; one that has not finished by then prints its threads (SIGQUIT) into
    # client-NAME-roundR.out and is killed, so a hang shows where it hangs instead of stalling the whole run
    run_out="$out/client-$name-round$r.out"
    # shellcheck disable=SC2086
    "$java_bin" -Xmx1g ${opts[$name]:-} -cp "$deps:${cls[$name]}" dev.artemisrdma.tools.RdmaPerf client --connect "$addr" \
      --port "${port[$name]}" --layer transport --mode "$mode" --size "$size" --iters "$iters" --warmup "$warmup" ${settles[$name]:-} \
      > "$run_out" 2>>"$out/client-$name.log" &
    client=$!
    waited=0
    while kill -0 $client 2>/dev/null && [ $waited -lt "${CLIENT_TIMEOUT:-180}" ]; do sleep 1; waited=$((waited + 1)); done
    if kill -0 $client 2>/dev/null; then
      echo "round $r $name HUNG after ${waited} s: thread dump in $(basename "$run_out")"
      kill -QUIT $client; sleep 3; kill -9 $client 2>/dev/null
      for s in "${names[@]}"; do jcmd "$(pgrep -f "server --bind $addr --port ${port[$s]}" | head -1)" Thread.print > "$out/server-$s-round$r.threads" 2>&1; done
    fi
    wait $client 2>/dev/null
    echo "round $r $name $(grep '^RESULT' "$run_out" | tail -1) $(grep -o 'jit_ms=[0-9]*' "$run_out" | tail -1)" \
      "$(grep -o 'settle_s=[0-9.]*' "$run_out" | tail -1)"
  done
done
kill $(jobs -p) 2>/dev/null
# medians of the rounds, and each build's against the perftest tool's
awk -v metric="$metric" -v tool="$tool" '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
  }
  / baseline=/ { sub(/.*baseline=/, ""); base = base " " $0 }
  /^round [0-9]+ [A-Za-z0-9_-]+ RESULT/ {
    for (i = 1; i <= NF; i++) if (index($i, metric "=") == 1) { v = substr($i, length(metric) + 2); m[$3] = m[$3] " " v; order[$3] = 1 }
  }
  END {
    b = median(base)
    printf "medians of the rounds (%s): %s %.2f\n", metric, tool, b
    for (n in order) printf "  %-16s %.2f  %.2fx %s\n", n, median(m[n]), (b > 0 ? median(m[n]) / b : 0), tool
  }' "$out/latency-ab.txt"
