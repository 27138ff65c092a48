# Sourced by the bench scripts that run lab tests outside CI (not run): lab-soaks, lab-tls, wire-pairs, wire-attacks,
# siw-compat.
#
# run_lab_selection NAME
#   Builds unless BUILD=0 (mvn install -DskipTests -Drdma.lab.skip=true, with the caller's mvn_args: install runs
#   it-tests' pre-integration-test phase, which writes lab-classpath.txt with this checkout's jars), checks that the
#   build is there, then execs it-tests/lab/run-lab-tests, which reads the caller's LAB_TESTS, LAB_WIRE_TESTS,
#   LAB_SIW_TESTS, LAB_JVM_OPTS and timeouts from the environment: the same boots, JVM options and JUnit summary as CI.
#   Run from the project root.
run_lab_selection() {
  local name="$1"
  if [ "${BUILD:-1}" != 0 ]; then
    mvn -B -q "${mvn_args[@]}" install -DskipTests -Drdma.lab.skip=true
  fi
  local target="$PWD/it-tests/target"
  if [ ! -s "$target/lab-classpath.txt" ] || [ ! -d "$target/test-classes/dev/artemisrdma/it" ]; then
    echo "$name: no build in $target (lab-classpath.txt, test-classes): run without BUILD=0, or mvn install" \
      "-DskipTests -Drdma.lab.skip=true first" >&2
    exit 2
  fi
  LAB_CLASSPATH_FILE="$target/lab-classpath.txt" LAB_TEST_CLASSES="$target/test-classes" LAB_TARGET="$target" \
    exec it-tests/lab/run-lab-tests
}
