#!/bin/bash
# Compiles the data-path shim against the installed rdma-core headers (Debian: libibverbs-dev librdmacm-dev;
# RHEL: rdma-core-devel) and the JDK's jni.h. Called by Maven in process-classes with the output directory and
# the building JDK's home; the .so lands in the jar next to the classes.
set -euo pipefail
out="$1"
jdk="${2:-${JAVA_HOME:-}}"
src="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f /usr/include/infiniband/verbs.h ] || [ ! -f /usr/include/rdma/rdma_cma.h ]; then
  echo "artemis-rdma build: rdma-core headers not found (/usr/include/infiniband/verbs.h, /usr/include/rdma/rdma_cma.h)." >&2
  echo "  Debian/Ubuntu: apt-get install libibverbs-dev librdmacm-dev    RHEL/Fedora: dnf install rdma-core-devel" >&2
  exit 1
fi
if [ -z "$jdk" ] || [ ! -f "$jdk/include/jni.h" ]; then
  echo "artemis-rdma build: jni.h not found under '$jdk/include': build with a full JDK (not a JRE), e.g." >&2
  echo "  Debian/Ubuntu: apt-get install openjdk-17-jdk-headless, and point JAVA_HOME at it" >&2
  exit 1
fi
mkdir -p "$out"
${CC:-gcc} -std=gnu11 -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror \
  -I"$jdk/include" -I"$jdk/include/linux" \
  -o "$out/libartemisrdma.so" "$src/artemisrdma.c"
