# Sourced by the A/B benchmarks (latency-ab, artemis-ab), not run: builds the connector of several git revisions so
# that one lab boot can measure them side by side.
#
# build_connector NAME REVISION BUILDS_DIR
#   Builds the connector (main classes only, no tests) of REVISION in a git worktree BUILDS_DIR/NAME (kept, and
#   reused while it is at that commit) and prints its class folder. REVISION "work" is the working tree as it is.
#   Uses the caller's mvn_args array (MVN_ARGS). NAME must be a plain word: it names folders and output columns.
build_connector() {
  local name="$1" rev="$2" builds="$3" root sha tree
  local -a args=()
  if declare -p mvn_args >/dev/null 2>&1; then
    args=("${mvn_args[@]}")
  fi
  [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || { echo "'$name' is not a plain name (letters, digits, - and _)" >&2; return 2; }
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  if [ "$rev" = work ]; then
    (cd "$root" && mvn -B -q "${args[@]}" package -DskipTests -Drdma.lab.skip=true -pl artemis-rdma-connector) >&2 \
      || return 1
    echo "$root/artemis-rdma-connector/target/classes"
    return 0
  fi
  sha="$(git -C "$root" rev-parse --verify "$rev^{commit}")" || return 2
  tree="$builds/$name"
  mkdir -p "$builds"
  if [ ! -d "$tree" ] || [ "$(git -C "$tree" rev-parse HEAD 2>/dev/null)" != "$sha" ]; then
    git -C "$root" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    git -C "$root" worktree prune
    git -C "$root" worktree add -q --detach "$tree" "$sha" >&2 || return 1
  fi
  (cd "$tree" && mvn -B -q "${args[@]}" package -DskipTests -Drdma.lab.skip=true -pl artemis-rdma-connector) >&2 \
    || return 1
  echo "$tree/artemis-rdma-connector/target/classes"
}
