#!/bin/bash
# Runs inside the Soft-RoCE lab (started by rdmaperf-bench): perftest and RdmaPerf on the same devices in one boot.
# Exit 3 when the lab settled into a slow latency mode (see jna-on-rxe.md): the caller boots again.
set -uo pipefail
cp_file="$1"
addr="${RDMA_LAB_ADDR1:-10.77.0.2}"
out="${RDMA_LAB_RESULTS:-/tmp}"
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
# RDMAPERF_JVM_OPTS replaces the JVM options (word-split), e.g. "-XX:TieredStopAtLevel=1" to compare with C1 only
read -r -a jvm_opts <<< "${RDMAPERF_JVM_OPTS:--Xmx1g}"
jvm=("${jvm_opts[@]}" -cp "$(cat "$cp_file")")
sizes=${SIZES:-64 1024 65536}
modes=${MODES:-lat bw}
rounds=${ROUNDS:-5}
port=18515
lat_iters=${LAT_ITERS:-50000}   # for sizes up to 4 KiB; a tenth for larger ones, whose round trips take 50 times longer
warmup=${WARMUP:-10000}         # round trips before measuring: the JIT (C2) compiles the data path meanwhile
# the transport layer (ping-pong and stream) then warms up on in rehearsal windows until its JIT is quiet (at most
# SETTLE seconds; 0: off): after the count alone a fresh client's C2 compiled for up to 9 s of a 9 s ping-pong window
# and 2.2-2.9 s of an 8 s 64 KiB stream window (jit_ms); ib_send_lat and ib_send_bw have nothing to compile
settle=${SETTLE:-60}
bw_iters=${BW_ITERS:-100000}   # for sizes up to 4 KiB, a tenth for larger ones: 20,000 was mostly start-up for both
                                # tools (ib_send_bw 64 B: 31,600 msg/s at 20,000, 54,100 at 200,000 in one boot)

cpu_file="$out/.perftest-cpu"
# perftest: server in the background, client to it; prints the result row of the client. The CPU seconds (user and
# system) that server and client used go to $cpu_file.server / .client (bash's time: each process's whole life)
perftest() { # tool size iterations
  local tool=$1 size=$2 n=$3
  port=$((port + 1))
  ( TIMEFORMAT='%3U %3S'; { time $tool -R -p $port -s "$size" -n "$n" >/dev/null 2>&1; } 2>"$cpu_file.server" ) &
  local server=$!
  sleep 1
  local row
  row="$( { TIMEFORMAT='%3U %3S'; time $tool -R -p $port -s "$size" -n "$n" "$addr" 2>&1; } 2>"$cpu_file.client" \
    | awk '$1 ~ /^[0-9]+$/ && NF >= 4 {print; exit}')"
  wait $server 2>/dev/null
  echo "$row"
}
# CPU microseconds per message of the last perftest pair (both processes): messages
perftest_cpu_us_per_msg() {
  cat "$cpu_file.server" "$cpu_file.client" 2>/dev/null | awk -v n="$1" '{s += $1 + $2} END {printf "%.3f", s * 1e6 / n}'
}
# user + system CPU ticks a live process has used (/proc/PID/stat fields 14 and 15, after the command name)
proc_ticks() {
  local stat rest
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
  rest="${stat##*) }"
  echo "$rest" | awk '{print $12 + $13}'
}
clk_tck="$(getconf CLK_TCK)"
lat_iters_for() { if [ "$1" -le 4096 ]; then echo "$lat_iters"; else echo $((lat_iters / 10)); fi; }
lat_warmup_for() { if [ "$1" -le 4096 ]; then echo "$warmup"; else echo $((warmup / 10)); fi; }
lat_row() { perftest ib_send_lat "$1" "$(lat_iters_for "$1")"; }   # bytes iters t_min t_max t_typical t_avg ...
bw_iters_for() { if [ "$1" -le 4096 ]; then echo "$bw_iters"; else echo $((bw_iters / 10)); fi; }
bw_row() { perftest ib_send_bw "$1" "$2"; }             # bytes iters bw_peak bw_avg msg_rate

before="$(lat_row 64)"
typical_before="$(echo "$before" | awk '{print $5}')"
echo "ib_send_lat 64 B before: typical ${typical_before} us"
if awk -v t="$typical_before" 'BEGIN {exit !(t == "" || t > 100)}'; then
  echo "lab is in a slow latency mode (typical ${typical_before} us > 100 us): results would be meaningless"
  exit 3
fi

"$java_bin" "${jvm[@]}" dev.artemisrdma.tools.RdmaPerf server --bind "$addr" --port 19000 > "$out/rdmaperf-server.log" 2>&1 &
server=$!
sleep 6

# layer mode size iters [warmup [cold]]: prints the RESULT line with min_us=..., cpu_us_per_msg=... (the client's CPU over
# its measured window), jit_ms=... (its JIT compiling in that window) and server_cpu_us_per_msg=... (the server's
# CPU over the whole connection, warmup included, per message it received) appended
rdmaperf() {
  local all ticks_before ticks_after w="${5:-$warmup}" extra=()
  if [ "$1" = transport ] && [ "$settle" != 0 ] && [ "${6:-}" != cold ]; then extra=(--settle "$settle"); fi
  ticks_before="$(proc_ticks $server)"
  all="$("$java_bin" "${jvm[@]}" dev.artemisrdma.tools.RdmaPerf client --connect "$addr" --port 19000 \
    --layer "$1" --mode "$2" --size "$3" --iters "$4" --warmup "$w" "${extra[@]}" 2>>"$out/rdmaperf-client.log")"
  ticks_after="$(proc_ticks $server)"
  echo "$all" >> "$out/rdmaperf-client.out" # everything it printed, transport statistics included
  # the server's messages: warm-up and measured, and the rehearsals of a settling transport client when it says so
  local served=$(($4 + w)) in_all
  in_all="$(echo "$all" | grep -o 'messages_in_all=[0-9]*' | tail -1 | cut -d= -f2)"
  if [ -n "$in_all" ]; then served=$in_all; fi
  echo "$(echo "$all" | grep '^RESULT' | tail -1) $(echo "$all" | grep -o 'min_us=[0-9.]*' | tail -1)" \
    "$(echo "$all" | grep -o 'cpu_us_per_msg=[0-9.]*' | tail -1)" \
    "$(echo "$all" | grep -o 'jit_ms=[0-9]*' | tail -1)" \
    "$(awk -v t=$((ticks_after - ticks_before)) -v hz="$clk_tck" -v n="$served" \
      'BEGIN {printf "server_cpu_us_per_msg=%.3f", t * 1e6 / hz / n}')"
}
field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }
median() { printf '%s\n' "$@" | grep . | sort -g | awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
lowest() { printf '%s\n' "$@" | grep . | sort -g | head -1; }

table="$out/rdmaperf-table.txt"
# latency settled and cold, p50 / p99, each against ib_send_lat's (medians of the rounds)
latency_table="$out/rdmaperf-latency.txt"
printf "%-8s | %-25s | %-39s | %-39s\n" size "ib_send_lat p50 / p99" "transport settled p50 / p99 (x ib)" \
  "transport cold p50 / p99 (x ib)" > "$latency_table"
cpu_table="$out/rdmaperf-cpu.txt"
rounds_file="$out/rdmaperf-rounds.txt" # every round's latencies and message rates: the spread behind each median
: > "$rounds_file"
# machine-readable: one figure a row, read by dev.artemisrdma.it.bench.Charts
summary="$out/rdmaperf-summary.csv"
echo "mode,size,tool,metric,value" > "$summary"
date -u +%F > "$out/measured-on.txt" # the day in the charts' titles, also when drawn again from a copy
# MTU (see lab-mtu.sh); lab-mtu.txt says which one was measured
source "$(dirname "$0")/lab-mtu.sh"
set_lab_mtu || exit 2
lab_mtu > "$out/lab-mtu.txt"
csv() { echo "$1,$2,$3,$4,$5" >> "$summary"; } # mode size tool metric value
printf "%-8s | %14s | %26s | %26s\n" size "ib_send_bw" "verbs (client + server)" "transport (client + server)" \
  > "$cpu_table"
{
  printf "%-8s %-5s | %12s %12s %12s | %10s %10s | %11s | %12s\n" size mode "ib_send_*" "verbs" "transport" \
    "verbs/ib" "trans/ib" "trans/verbs" "min: t/ib"
} > "$table"
for size in $sizes; do
  if [[ " $modes " == *" lat "* ]]; then
    # rounds of ib_send_lat, verbs, transport, interleaved: the lab drifts within a boot, so each tool sees the same
    # drift; the table shows the median of the rounds' medians and the lowest minimum
    n="$(lat_iters_for $size)"; w="$(lat_warmup_for $size)"
    # the transport twice a round: settled (after its rehearsal windows, when SETTLE is on) and cold (a fresh
    # client measured after the warm-up count alone, as a broker's request/reply traffic meets it); p99 beside p50
    ib_typs=(); ib_mins=(); ib99s=(); v50s=(); t50s=(); tmins=(); t99s=(); c50s=(); c99s=()
    for round in $(seq "$rounds"); do
      ib="$(lat_row $size)"
      ib_typs+=("$(echo "$ib" | awk '{print $5}')"); ib_mins+=("$(echo "$ib" | awk '{print $3}')")
      ib99s+=("$(echo "$ib" | awk '{print $8}')")
      v="$(rdmaperf verbs lat $size $n $w)"; t="$(rdmaperf transport lat $size $n $w)"
      c="$(rdmaperf transport lat $size $n $w cold)"
      echo "round $round: ib_send_lat typical ${ib_typs[-1]} us, 99% ${ib99s[-1]} us"; echo "$v"; echo "$t"
      echo "cold: $c"
      v50s+=("$(field "$v" p50_us)"); t50s+=("$(field "$t" p50_us)"); tmins+=("$(field "$t" min_us)")
      t99s+=("$(field "$t" p99_us)"); c50s+=("$(field "$c" p50_us)"); c99s+=("$(field "$c" p99_us)")
      echo "lat $size $round ib_send_lat=${ib_typs[-1]}/${ib99s[-1]} settled=${t50s[-1]}/${t99s[-1]}" \
        "cold=${c50s[-1]}/${c99s[-1]}" >> "$rounds_file"
    done
    ib_typ="$(median "${ib_typs[@]}")"; ib_min="$(lowest "${ib_mins[@]}")"
    v50="$(median "${v50s[@]}")"; t50="$(median "${t50s[@]}")"; tmin="$(lowest "${tmins[@]}")"
    ib99="$(median "${ib99s[@]}")"; t99="$(median "${t99s[@]}")"
    c50="$(median "${c50s[@]}")"; c99="$(median "${c99s[@]}")"
    csv lat $size ib_send_lat p99_us "$ib99"; csv lat $size transport p99_us "$t99"
    csv lat $size transport-cold p50_us "$c50"; csv lat $size transport-cold p99_us "$c99"
    awk -v s=$size -v ib="$ib_typ" -v ib99="$ib99" -v t="$t50" -v t99="$t99" -v c="$c50" -v c99="$c99" 'BEGIN {
      printf "%-8s | %9s / %9s us | %9s / %9s us (%5.2fx / %5.2fx) | %9s / %9s us (%5.2fx / %5.2fx)\n", s, ib, ib99,
        t, t99, (ib > 0 ? t / ib : 0), (ib99 > 0 ? t99 / ib99 : 0), c, c99, (ib > 0 ? c / ib : 0),
        (ib99 > 0 ? c99 / ib99 : 0) }' >> "$latency_table"
    csv lat $size ib_send_lat p50_us "$ib_typ"; csv lat $size verbs p50_us "$v50"; csv lat $size transport p50_us "$t50"
    csv lat $size ib_send_lat min_us "$ib_min"; csv lat $size transport min_us "$tmin"
    awk -v s=$size -v ib="$ib_typ" -v ibmin="$ib_min" -v v="$v50" -v t="$t50" -v tmin="$tmin" 'BEGIN {
      printf "%-8s %-5s | %9s us %9s us %9s us | %10.2f %10.2f | %11.2f | %5.2f (%s/%s)\n", s, "lat", ib, v, t,
        (ib > 0 ? v / ib : 0), (ib > 0 ? t / ib : 0), (v > 0 ? t / v : 0), (ibmin > 0 ? tmin / ibmin : 0), tmin,
        ibmin }' >> "$table"
  fi
  [[ " $modes " == *" bw "* ]] || continue
  # rounds of ib_send_bw, verbs, transport, interleaved as for latency (one round swung 3x between runs); the
  # table shows the median of the rounds for each tool's message rate and CPU per message
  n="$(bw_iters_for $size)"; w="$(lat_warmup_for $size)"
  ib_rates=(); ib_cpus=(); vms=(); tms=(); vcs=(); vss=(); tcs=(); tss=()
  for round in $(seq "$rounds"); do
    bw="$(bw_row $size $n)"
    ib_rates+=("$(echo "$bw" | awk '{printf "%.0f", $5 * 1e6}')"); ib_cpus+=("$(perftest_cpu_us_per_msg $n)")
    v="$(rdmaperf verbs bw $size $n $w)"; t="$(rdmaperf transport bw $size $n $w)"
    echo "bw round $round: ib_send_bw ${ib_rates[-1]} msg/s"; echo "$v"; echo "$t"
    vms+=("$(field "$v" msgs_per_s)"); tms+=("$(field "$t" msgs_per_s)")
    vcs+=("$(field "$v" cpu_us_per_msg)"); vss+=("$(field "$v" server_cpu_us_per_msg)")
    tcs+=("$(field "$t" cpu_us_per_msg)"); tss+=("$(field "$t" server_cpu_us_per_msg)")
  done
  ib_rate="$(median "${ib_rates[@]}")"; vm="$(median "${vms[@]}")"; tm="$(median "${tms[@]}")"
  ib_cpu="$(median "${ib_cpus[@]}")"
  vc="$(median "${vcs[@]}")"; vs="$(median "${vss[@]}")"; tc="$(median "${tcs[@]}")"; ts="$(median "${tss[@]}")"
  csv bw $size ib_send_bw msgs_per_s "$ib_rate"
  csv bw $size verbs msgs_per_s "$vm"; csv bw $size transport msgs_per_s "$tm"
  csv bw $size ib_send_bw cpu_us_per_msg "$ib_cpu"
  csv bw $size verbs cpu_us_per_msg "$(awk -v a="$vc" -v b="$vs" 'BEGIN {printf "%.3f", a + b}')"
  csv bw $size transport cpu_us_per_msg "$(awk -v a="$tc" -v b="$ts" 'BEGIN {printf "%.3f", a + b}')"
  awk -v s=$size -v ib="$ib_cpu" -v vc="$vc" -v vs="$vs" -v tc="$tc" -v ts="$ts" 'BEGIN {
    printf "%-8s | %11.2f us | %7.2f us (%6.2f + %6.2f) | %7.2f us (%6.2f + %6.2f)\n", s, ib, vc + vs, vc, vs,
      tc + ts, tc, ts }' >> "$cpu_table"
  # ratios from message rates (Gb/s at 64 B rounds to 0.01); shown as Mbit/s; each rate the median of the rounds
  awk -v s=$size -v ib="$ib_rate" -v v="$vm" -v t="$tm" 'BEGIN {
    printf "%-8s %-5s | %7.1f Mb/s %7.1f Mb/s %7.1f Mb/s | %10.2f %10.2f | %11.2f | %12s\n", s, "bw",
      ib * s * 8 / 1e6, v * s * 8 / 1e6, t * s * 8 / 1e6, (ib > 0 ? v / ib : 0), (ib > 0 ? t / ib : 0),
      (v > 0 ? t / v : 0), "-" }' >> "$table"
  echo "bw $size: message rates of the rounds: ib_send_bw ${ib_rates[*]}; verbs ${vms[*]}; transport ${tms[*]}" \
    >> "$rounds_file"
done
kill $server 2>/dev/null
after="$(lat_row 64)"
typical_after="$(echo "$after" | awk '{print $5}')"
echo "ib_send_lat 64 B after: typical ${typical_after} us"
echo
echo "RdmaPerf vs perftest, one lab boot (latency: one-way, median of $rounds rounds' medians and lowest minimum;"
echo "bandwidth: message rates)"
echo "ib_send_lat 64 B typical before/after: ${typical_before} / ${typical_after} us"
cat "$table"
if [[ " $modes " == *" lat "* ]]; then
  echo
  echo "Latency (one-way), settled and cold, p50 / p99: medians of the rounds"
  cat "$latency_table"
fi
if [[ " $modes " == *" bw "* ]] || [[ " $modes " == *" lat "* ]]; then
  echo
  cat "$rounds_file"
fi
if [[ " $modes " == *" bw "* ]]; then
  echo
  echo "CPU per message streamed (bw), both ends: perftest's two processes over their whole life / iterations;"
  echo "RdmaPerf's client over its measured window + its server over the connection (warmup included) / messages"
  cat "$cpu_table"
fi
if awk -v t="$typical_after" 'BEGIN {exit !(t == "" || t > 100)}'; then
  echo "lab fell into a slow latency mode during the run: results are not comparable"
  exit 3
fi
