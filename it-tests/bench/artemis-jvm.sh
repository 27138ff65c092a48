# Sourced by artemis-bench and artemis-ab, not run: the options of the benchmark's two JVMs (clients, broker).
#
# artemis_jvm_opts
#   Fills the caller's jvm_opts array from JVM_OPTS (-Xmx2g) and exports BROKER_JVM_OPTS (-Xmx2g), both with the
#   options of the JIT knob: c1 (the default: -XX:TieredStopAtLevel=1) or c2 (the JVM's default). Returns 2 for
#   another JIT. C1 by default: under the lab's emulation C2 was still compiling for more than a core's worth of time
#   after 150 s of warm-up, and the rounds of one run differed by up to 4x; with C1 the JIT settles within a minute.
artemis_jvm_opts() {
  read -r -a jvm_opts <<<"${JVM_OPTS:--Xmx2g}"
  export BROKER_JVM_OPTS="${BROKER_JVM_OPTS:--Xmx2g}"
  case "${JIT:-c1}" in
    c1) jvm_opts+=(-XX:TieredStopAtLevel=1); BROKER_JVM_OPTS="$BROKER_JVM_OPTS -XX:TieredStopAtLevel=1" ;;
    c2) ;;
    *) echo "JIT takes c1 (the default) or c2, got '${JIT}'" >&2; return 2 ;;
  esac
}
