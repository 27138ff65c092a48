# Sourced inside the Soft-RoCE lab by the benchmarks that take an MTU knob (rdmaperf-in-lab.sh, latency-ab-in-lab.sh).
# set_lab_mtu: the veth pair's MTU for this boot, when MTU is set (rxe follows it: 1500, ordinary Ethernet, gives RoCE
# MTU 1024; the lab's 9000 gives 4096); returns 2 when it cannot. lab_mtu: the MTU now in force, for the results.
set_lab_mtu() {
  if [ -n "${MTU:-}" ]; then
    ip link set v0 mtu "$MTU" && ip link set v1 mtu "$MTU" || { echo "cannot set the lab's MTU to $MTU" >&2; return 2; }
    sleep 1
  fi
}
lab_mtu() {
  echo "veth MTU $(cat /sys/class/net/v1/mtu), RoCE $(ibv_devinfo -d rxe1 2>/dev/null | awk '/active_mtu/ {print $2}')"
}
