#!/bin/bash
# Stage 2 of an rdma-lab guest boot. `rdma-lab run` copies this file into the
# per-run control share; the initramfs's /init runs it, as root, chrooted into
# the host's root file system (read-only 9p), with its own output going to the
# kernel console (ttyS0, saved by the host as console.log).
#
# The control share (/run/lab-ctl) holds, written by the host:
#   config  bash assignments: RESULTS, PROJECT (absolute paths), ROLE ("" for the
#           one-guest lab; a or b for the two hosts of `rdma-lab run --hosts 2`),
#           FABRIC (rxe, siw or both: `rdma-lab run --fabric`; rxe when unset),
#           OVERLAYS (array of absolute paths to make writable with a tmpfs-backed overlay)
#   argv    the command, NUL-separated
#   env     the command's environment, NUL-separated NAME=VALUE entries
# and receives from here:
#   rc      the command's exit status (only once the command has run)
#   error   one line per lab failure (the command did not run)
#
# The command's stdout goes to ttyS1 and its stderr to ttyS2, which the host
# streams to its own stdout and stderr.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CTL=/run/lab-ctl
LAB_TMP=/run/lab-tmp
OUT=/dev/ttyS1
ERR=/dev/ttyS2

mark() { echo "rdma-lab(guest): [$(cut -d' ' -f1 /proc/uptime)] $*"; }
fail() {
    echo "rdma-lab(guest): $*"
    echo "$*" >> "$CTL/error"
    sync
    exit 1
}

# shellcheck source=/dev/null
. "$CTL/config" || fail "cannot read $CTL/config"

mark "consoles"
# --- consoles: raw, so the host gets the bytes exactly as written ----------
stty -F "$OUT" raw -echo || fail "cannot set up $OUT"
stty -F "$ERR" raw -echo || fail "cannot set up $ERR"

# --- what udev and systemd would have set up -------------------------------
mkdir -p /dev/shm /dev/pts /dev/mqueue
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || fail "cannot mount /dev/shm"
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts || true
mount -t mqueue mqueue /dev/mqueue 2>/dev/null || true
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
mkdir -p -m 1777 "$LAB_TMP"
mkdir -p /run/lab/tmp-upper /run/lab/tmp-work
hostname "rdma-lab${ROLE:+-$ROLE}"

mark "tmp overlay"
# --- a writable /tmp that still shows the host's /tmp ----------------------
# The host root is read-only, and a plain tmpfs on /tmp would hide a checkout,
# ~/.m2 or a results dir that live under the host's /tmp. An overlay keeps the
# host's files visible (read-only lower layer) and takes writes in guest RAM.
modprobe overlay || true
chmod 1777 /run/lab/tmp-upper
if ! mount -t overlay overlay \
        -o lowerdir=/tmp,upperdir=/run/lab/tmp-upper,workdir=/run/lab/tmp-work /tmp; then
    echo "rdma-lab(guest): no overlay on /tmp; /tmp stays read-only (use \$TMPDIR / \$RDMA_LAB_TMP)"
fi

mark "overlays, results share"
# --- --overlay dirs: writable, changes discarded at power-off ---------------
i=0
while IFS= read -r -d '' d; do
    i=$((i + 1))
    mkdir -p "/run/lab/ov$i/upper" "/run/lab/ov$i/work"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=/run/lab/ov$i/upper,workdir=/run/lab/ov$i/work" "$d" \
        || fail "cannot mount an overlay on $d"
done < <(for d in "${OVERLAYS[@]}"; do printf '%s\0' "$d"; done | sort -z)

# --- the results share, at the same path as on the host ---------------------
[ -d "$RESULTS" ] || fail "results dir $RESULTS is not visible in the guest"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 labout "$RESULTS" \
    || fail "cannot mount the results share at $RESULTS"

# --- names for the lab's addresses (the host's /etc is read-only) ----------
{
    cat /etc/hosts 2>/dev/null
    echo "127.0.1.1 rdma-lab${ROLE:+-$ROLE}"
    if [ -z "$ROLE" ]; then
        echo "10.77.0.1 rdma-lab-0"
        echo "10.77.0.2 rdma-lab-1"
        echo "fd77::1 rdma-lab-0-v6"
        echo "fd77::2 rdma-lab-1-v6"
    else
        echo "10.78.0.1 rdma-lab-a"
        echo "10.78.0.2 rdma-lab-b"
        echo "fd78::1 rdma-lab-a-v6"
        echo "fd78::2 rdma-lab-b-v6"
        echo "10.79.0.1 rdma-lab-a-mgmt"
        echo "10.79.0.2 rdma-lab-b-mgmt"
    fi
} > /run/lab/hosts
mount --bind /run/lab/hosts /etc/hosts || true

mark "soft-roce"
# Modules do not auto-load here; crc32_generic first or rxe fails to init crc32.
modprobe crc32_generic || fail "modprobe crc32_generic failed (is /lib/modules/$(uname -r) there?)"

FABRIC=${FABRIC:-rxe}
case $FABRIC in rxe|siw|both) ;; *) fail "unknown fabric '$FABRIC' (rxe, siw or both)" ;; esac
# the fabric's RDMA modules: Soft-RoCE (rdma_rxe) and/or soft-iWARP (siw, built out of tree by rdma-lab setup)
# (with siw also tcp_diag: siw carries its queue pairs over kernel TCP sockets, and `ss -tin` needs the socket diag
# modules to show them with their byte counts; without them ss falls back to /proc/net/tcp, without bytes)
case $FABRIC in rxe) RDMA_MODS="rdma_rxe" ;; siw) RDMA_MODS="siw tcp_diag" ;; both) RDMA_MODS="rdma_rxe siw tcp_diag" ;; esac
has_rxe() { [ "$FABRIC" != siw ]; }
has_siw() { [ "$FABRIC" != rxe ]; }
# siw_links NETDEV...: soft-iWARP devices siw0, siw1, ... on those netdevs (siw runs each queue pair over a kernel
# TCP socket)
siw_links() {
    local i=0 dev
    for dev in "$@"; do
        rdma link add "siw$i" type siw netdev "$dev" || fail "rdma link add siw$i type siw netdev $dev failed"
        i=$((i + 1))
    done
}

# one_guest: two rxe devices over the two ends of a veth pair, in one kernel (rdma_cm loops every connection back
# inside the device that owns the destination address: nothing crosses the veth)
one_guest() {
    # --- Soft-RoCE: two rxe devices over the two ends of a veth pair -----------
    # Jumbo frames, as RoCE fabrics are usually run: rxe then reports an active MTU of 4096 instead of 1024, so a
    # 1 KiB message plus any header is one packet, as on the hardware our users compare against.
    # shellcheck disable=SC2086
    modprobe -a $RDMA_MODS rdma_ucm ib_uverbs veth || fail "modprobe -a $RDMA_MODS rdma_ucm ib_uverbs veth failed"
    # IPv6 too (fd77::1/64, fd77::2/64; nodad: usable at once instead of "tentative" for a second), so rxe gets
    # IPv6 GIDs and rdma_cm endpoints like rdma://[fd77::1]:61700 can be tested.
    ip -batch - <<'IPCMDS' || fail "setting up lo and the veth pair v0 (10.77.0.1/24, fd77::1/64) / v1 (10.77.0.2/24, fd77::2/64) failed"
link set lo up
link add v0 type veth peer name v1
addr add 10.77.0.1/24 dev v0
addr add 10.77.0.2/24 dev v1
addr add fd77::1/64 dev v0 nodad
addr add fd77::2/64 dev v1 nodad
link set v0 mtu 9000
link set v1 mtu 9000
link set v0 up
link set v1 up
IPCMDS
    local nlinks=0 names=""
    if has_rxe; then
        rdma link add rxe0 type rxe netdev v0 || fail "rdma link add rxe0 type rxe netdev v0 failed"
        rdma link add rxe1 type rxe netdev v1 || fail "rdma link add rxe1 type rxe netdev v1 failed"
        nlinks=$((nlinks + 2)) names=rxe0/rxe1
    fi
    if has_siw; then
        siw_links v0 v1
        nlinks=$((nlinks + 2)) names=${names:+$names/}siw0/siw1
        # rdma_cm resolves a client bound to 10.77.0.2 (siw1) that connects to 10.77.0.1 with an ARP out of v1, and
        # v0 drops a request from another local address as a martian: RDMA_CM_EVENT_ADDR_ERROR -110 without this
        sysctl -qw net.ipv4.conf.all.accept_local=1 || fail "sysctl -w net.ipv4.conf.all.accept_local=1 failed"
    fi
    links=""
    for _ in $(seq 100); do
        links=$(rdma link show 2>&1)
        [ "$(grep -c 'state ACTIVE' <<< "$links")" -ge "$nlinks" ] && break
        sleep 0.1
    done
    [ "$(grep -c 'state ACTIVE' <<< "$links")" -ge "$nlinks" ] || fail "$names did not become ACTIVE: $links"
    has_rxe || return 0
    # rxe adds a GID per address of its netdev from a work queue: wait for the IPv6 ones, or IPv6 connects fail.
    gid6() { grep -ql "^fd77:0000:0000:0000:0000:0000:0000:000$2\$" /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null; }
    for _ in $(seq 100); do
        gid6 rxe0 1 && gid6 rxe1 2 && break
        sleep 0.1
    done
    gid6 rxe0 1 && gid6 rxe1 2 || fail "rxe0/rxe1 have no GID for fd77::1/fd77::2: $(cat /sys/class/infiniband/rxe*/ports/1/gids/[0-3] 2>&1)"
}

# two_hosts: this guest is host A or B of `rdma-lab run --hosts 2`: one virtio NIC on the wire (wire0, rxe0 on it,
# 10.78.0.N and fd78::N) and one on the management link (mgmt0, 10.79.0.N, no RDMA). The NICs are found by the MAC
# addresses rdma-lab gave them (52:54:00:78:... wire, 52:54:00:79:... management) and renamed, so tests name them.
two_hosts() {
    local n
    case $ROLE in a) n=1 ;; b) n=2 ;; *) fail "unknown lab role '$ROLE' (a or b)" ;; esac
    # shellcheck disable=SC2086
    modprobe -a virtio_net $RDMA_MODS rdma_ucm ib_uverbs sch_netem || fail "modprobe -a virtio_net $RDMA_MODS rdma_ucm ib_uverbs sch_netem failed"
    local wire="" mgmt="" dev mac
    for _ in $(seq 100); do
        for dev in /sys/class/net/*; do
            mac=$(cat "$dev/address" 2>/dev/null)
            case $mac in 52:54:00:78:*) wire=${dev##*/} ;; 52:54:00:79:*) mgmt=${dev##*/} ;; esac
        done
        [ -n "$wire" ] && [ -n "$mgmt" ] && break
        sleep 0.1
    done
    [ -n "$wire" ] && [ -n "$mgmt" ] || fail "host $ROLE: no virtio NICs with the lab's MAC addresses: $(ls /sys/class/net)"
    ip -batch - <<IPCMDS || fail "host $ROLE: setting up wire0 (10.78.0.$n/24, fd78::$n/64) and mgmt0 (10.79.0.$n/24) failed"
link set lo up
link set $wire name wire0
link set $mgmt name mgmt0
addr add 10.78.0.$n/24 dev wire0
addr add fd78::$n/64 dev wire0 nodad
addr add 10.79.0.$n/24 dev mgmt0
link set wire0 mtu 9000
link set wire0 up
link set mgmt0 up
IPCMDS
    local nlinks=0 names=""
    if has_rxe; then
        rdma link add rxe0 type rxe netdev wire0 || fail "host $ROLE: rdma link add rxe0 type rxe netdev wire0 failed"
        nlinks=$((nlinks + 1)) names=rxe0
    fi
    if has_siw; then
        siw_links wire0
        nlinks=$((nlinks + 1)) names=${names:+$names/}siw0
    fi
    local links=""
    for _ in $(seq 100); do
        links=$(rdma link show 2>&1)
        [ "$(grep -c 'state ACTIVE' <<< "$links")" -ge "$nlinks" ] && break
        sleep 0.1
    done
    [ "$(grep -c 'state ACTIVE' <<< "$links")" -ge "$nlinks" ] || fail "host $ROLE: $names did not become ACTIVE: $links"
    has_rxe || return 0
    for _ in $(seq 100); do
        grep -ql "^fd78:0000:0000:0000:0000:0000:0000:000$n\$" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null && break
        sleep 0.1
    done
    grep -ql "^fd78:0000:0000:0000:0000:0000:0000:000$n\$" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null \
        || fail "host $ROLE: rxe0 has no GID for fd78::$n"
}

if [ -z "${ROLE:-}" ]; then
    one_guest
else
    two_hosts
fi

mark "command"
# --- the command -----------------------------------------------------------
mapfile -d '' -t ARGV < "$CTL/argv" || fail "cannot read $CTL/argv"
mapfile -d '' -t ENVV < "$CTL/env" || fail "cannot read $CTL/env"
[ "${#ARGV[@]}" -gt 0 ] || fail "empty command"
cd "$PROJECT" || fail "cannot cd to $PROJECT"
ulimit -l unlimited 2>/dev/null || true
ulimit -n 65536 2>/dev/null || true
echo "rdma-lab(guest): running ${ARGV[*]}"
env -i "${ENVV[@]}" "${ARGV[@]}" < /dev/null > "$OUT" 2> "$ERR"
rc=$?
echo "rdma-lab(guest): command exited with $rc"
# stty sets attributes with TCSADRAIN: it returns once the consoles' output
# buffers have gone out, so nothing the command wrote is lost at power-off.
stty -F "$OUT" raw -echo
stty -F "$ERR" raw -echo
sync
echo "$rc" > "$CTL/rc.tmp" && mv "$CTL/rc.tmp" "$CTL/rc"
sync
