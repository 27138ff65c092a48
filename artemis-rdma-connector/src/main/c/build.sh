#!/bin/bash
# Compiles the data-path shim against the installed rdma-core headers (Debian: libibverbs-dev librdmacm-dev;
# RHEL: rdma-core-devel). Called by Maven in process-classes; the .so lands in the jar next to the classes.
set -euo pipefail
out="$1"
src="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f /usr/include/infiniband/verbs.h ] || [ ! -f /usr/include/rdma/rdma_cma.h ]; then
  echo "artemis-rdma build: rdma-core headers not found (/usr/include/infiniband/verbs.h, /usr/include/rdma/rdma_cma.h)." >&2
  echo "  Debian/Ubuntu: apt-get install libibverbs-dev librdmacm-dev    RHEL/Fedora: dnf install rdma-core-devel" >&2
  exit 1
fi
mkdir -p "$out"
${CC:-gcc} -std=gnu11 -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror \
  -o "$out/libartemisrdma.so" "$src/artemisrdma.c"
