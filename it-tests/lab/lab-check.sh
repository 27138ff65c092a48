#!/bin/bash
# Runs inside the lab guest (`rdma-lab check`): shows the Soft-RoCE devices and
# runs a short ib_send_lat over rdma_cm between the lab's two addresses.
# Exits non-zero if any step failed.
set -u
ADDR0=${RDMA_LAB_ADDR0:-10.77.0.1}
TMP=${RDMA_LAB_TMP:-/tmp}
failed=0
step() { printf '\n== %s\n' "$*"; }
bad() { echo "FAILED: $*"; failed=1; }

step "uname -r"
uname -r
step "ibv_devices"
out=$(ibv_devices 2>&1); echo "$out"
grep -q rxe0 <<< "$out" && grep -q rxe1 <<< "$out" || bad "ibv_devices does not list rxe0 and rxe1"
step "rdma link"
out=$(rdma link 2>&1); echo "$out"
[ "$(grep -c 'state ACTIVE' <<< "$out")" -ge 2 ] || bad "rdma link does not show two ACTIVE links"
step "GIDs of rxe0 and rxe1 (IPv4-mapped and IPv6, one per address of v0/v1)"
for dev in rxe0 rxe1; do
    gids=$(cat /sys/class/infiniband/$dev/ports/1/gids/* 2>/dev/null | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$')
    echo "$dev:" $gids
done
grep -q '^fd77:0000:0000:0000:0000:0000:0000:0001$' /sys/class/infiniband/rxe0/ports/1/gids/* \
    || bad "rxe0 has no GID for fd77::1"
step "ibv_devinfo -d rxe0"
ibv_devinfo -d rxe0 2>&1 | grep -E 'hca_id|transport|state|active_mtu|link_layer' || bad "ibv_devinfo -d rxe0"

step "ib_send_lat -R -s 64 -n 2000 (rdma_cm; server and client on $ADDR0)"
port=18515
timeout 120 ib_send_lat -R -s 64 -n 2000 -p "$port" > "$TMP/lat-server.log" 2>&1 &
server=$!
ok=0
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    sleep 1
    if timeout 120 ib_send_lat -R -s 64 -n 2000 -p "$port" "$ADDR0" > "$TMP/lat-client.log" 2>&1; then
        ok=1
        break
    fi
    kill -0 "$server" 2>/dev/null || break   # the server gave up: do not retry
    echo "(client attempt $attempt failed, retrying)"
done
wait "$server"; src=$?
echo "-- client:"; cat "$TMP/lat-client.log"
echo "-- server:"; cat "$TMP/lat-server.log"
[ "$ok" = 1 ] || bad "ib_send_lat client"
[ "$src" = 0 ] || bad "ib_send_lat server exited with $src"
grep -Eq '^ *64 +2000 ' "$TMP/lat-client.log" || bad "no latency line for 64-byte messages in the client's output"

step "rdma resource show"
rdma resource show 2>&1

if [ "$failed" = 0 ]; then
    printf '\nlab check: OK\n'
else
    printf '\nlab check: FAILED\n'
fi
exit "$failed"
