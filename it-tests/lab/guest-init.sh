#!/bin/busybox sh
# /init of the rdma-lab initramfs (PID 1 in the guest). `rdma-lab setup` copies
# this file into the initramfs next to a static busybox and the modules that
# 9p over virtio needs; changing it makes the next `setup` rebuild the initramfs.
#
# It loads those modules, mounts the host's root file system read-only over
# virtio-9p at /newroot, a tmpfs on /newroot/run, the per-run control share
# (mount tag labctl) at /newroot/run/lab-ctl, proc/sys/devtmpfs, and then runs
# the per-run stage 2 script (bash, from the control share) chrooted into the
# host root. Whatever happens, it powers the VM off at the end.
/bin/busybox --install -s /bin
export PATH=/bin

CTL=/newroot/run/lab-ctl
fail() {
    echo "rdma-lab init: $*"
    [ -d "$CTL" ] && echo "init: $*" >> "$CTL/error" 2>/dev/null
    sync
    poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

while read -r m; do
    [ -n "$m" ] || continue
    insmod "/modules/$m" || fail "insmod $m failed"
done < /modules/order

O9P="trans=virtio,version=9p2000.L,msize=524288"
# rdmalab.rootcache=<9p cache mode> on the kernel command line (rdma-lab run
# sets it) chooses how the guest caches the read-only host root.
ROOTCACHE=none
for a in $(cat /proc/cmdline); do
    case "$a" in rdmalab.rootcache=*) ROOTCACHE=${a#rdmalab.rootcache=} ;; esac
done
mount -t 9p -o "$O9P,ro,cache=$ROOTCACHE" hostroot /newroot || fail "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "cannot mount tmpfs on /run"
mkdir -p "$CTL"
mount -t 9p -o "$O9P" labctl "$CTL" || fail "cannot mount the control share (9p tag labctl)"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev

[ -f "$CTL/stage2.sh" ] || fail "no stage2.sh in the control share"
chroot /newroot /bin/bash /run/lab-ctl/stage2.sh > /dev/console 2>&1 \
    || echo "rdma-lab init: stage 2 exited with $?"
sync
poweroff -f
