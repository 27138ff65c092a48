# Sourced by the bench scripts (not run): the class paths they launch JVMs with.
#
# bench_classpath SCOPE MODULE FILE
#   Writes MODULE's class path of SCOPE (runtime, test) to FILE (an absolute path). Offline first, since the build
#   just filled the local repository and the lab machines may have no network; online only when that fails. Uses the
#   caller's mvn_args array (MVN_ARGS) when it has one.
# bench_test_classpath
#   Prints the class path of it-tests' test scope plus its test classes: what the Java benches run on. Writes
#   it-tests/target/bench-cp.txt on the way.
bench_classpath() {
  local scope="$1" module="$2" file="$3"
  local -a args=()
  if declare -p mvn_args >/dev/null 2>&1; then
    args=("${mvn_args[@]}")
  fi
  mkdir -p "$(dirname "$file")"
  mvn -B -q -o "${args[@]}" dependency:build-classpath -Dmdep.includeScope="$scope" -Dmdep.outputFile="$file" \
    -pl "$module" >/dev/null 2>&1 \
    || mvn -B -q "${args[@]}" dependency:build-classpath -Dmdep.includeScope="$scope" -Dmdep.outputFile="$file" \
      -pl "$module"
}

bench_test_classpath() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  bench_classpath test it-tests "$root/it-tests/target/bench-cp.txt"
  echo "$(cat "$root/it-tests/target/bench-cp.txt"):$root/it-tests/target/test-classes"
}
