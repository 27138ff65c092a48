#!/bin/bash
# Runs inside the Soft-RoCE lab (started by latency-ab): rounds of ib_send_lat, then each build's RdmaPerf transport
# ping-pong; prints every round and, at the end, each build's median of the rounds against ib_send_lat's.
set -uo pipefail
addr="${RDMA_LAB_ADDR1:-10.77.0.2}"
out="${RDMA_LAB_RESULTS:-/tmp}"
exec > >(tee -a "$out/latency-ab.txt") 2>&1
size="${SIZE:-64}"; rounds="${ROUNDS:-5}"; iters="${ITERS:-50000}"; warmup="${WARMUP:-10000}"
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
deps="$(cat "$LATENCY_AB_DEPS")"
names=(); declare -A cls port
p=19100
for entry in $LATENCY_AB_BUILDS; do
  name="${entry%%=*}"; names+=("$name"); cls[$name]="${entry#*=}"; port[$name]=$p; p=$((p + 100))
  "$java_bin" -Xmx1g -cp "$deps:${cls[$name]}" dev.artemisrdma.tools.RdmaPerf server --bind "$addr" \
    --port "${port[$name]}" > "$out/server-$name.log" 2>&1 &
done
sleep 8
echo "latency-ab: $size B, $rounds rounds of $iters round trips ($warmup warm-up); builds: ${names[*]}"
lat_port=18600
for r in $(seq 1 "$rounds"); do
  lat_port=$((lat_port + 1))
  ib_send_lat -R -p $lat_port -s "$size" -n "$iters" >/dev/null 2>&1 &
  lat=$!
  sleep 1
  typical="$(ib_send_lat -R -p $lat_port -s "$size" -n "$iters" "$addr" 2>&1 \
    | awk '$1 ~ /^[0-9]+$/ && NF >= 4 {print $5; exit}')"
  wait $lat
  echo "round $r ib_send_lat typical_us=$typical"
  for name in "${names[@]}"; do
    res="$("$java_bin" -Xmx1g -cp "$deps:${cls[$name]}" dev.artemisrdma.tools.RdmaPerf client --connect "$addr" \
      --port "${port[$name]}" --layer transport --mode lat --size "$size" --iters "$iters" --warmup "$warmup" \
      2>>"$out/client-$name.log" | grep '^RESULT' | tail -1)"
    echo "round $r $name $res"
  done
done
kill $(jobs -p) 2>/dev/null
# medians of the rounds, and each build's against ib_send_lat's
awk '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
  }
  / ib_send_lat typical_us=/ { sub(/.*typical_us=/, ""); base = base " " $0 }
  /^round [0-9]+ [A-Za-z0-9_-]+ RESULT/ { for (i = 1; i <= NF; i++) if ($i ~ /^p50_us=/) { v = $i; sub(/p50_us=/, "", v); p50[$3] = p50[$3] " " v; order[$3] = 1 } }
  END {
    b = median(base)
    printf "medians of the rounds: ib_send_lat %.2f us\n", b
    for (n in order) printf "  %-16s %.2f us  %.2fx ib_send_lat\n", n, median(p50[n]), (b > 0 ? median(p50[n]) / b : 0)
  }' "$out/latency-ab.txt"
