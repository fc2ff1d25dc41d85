#!/usr/bin/env bash
# Installs every Debian package the build, the tests, the checking scripts and the
# benchmarks need.
# Idempotent and non-interactive: packages already present are skipped.
set -euo pipefail

packages=(
  cmake g++ make pkg-config git
  libfabric-dev libfabric-bin          # the ofi transport and fi_pingpong
  libucx-dev ucx-utils                 # the ucx transport and ucx_perftest
  libhwloc-dev                         # topology discovery
  libsodium-dev                        # HMAC proofs of the job secret in the bootstrap
  googletest libgtest-dev libgmock-dev # tests
  clang libclang-rt-14-dev             # scripts/fuzz.sh: libFuzzer, ASan, UBSan
  valgrind                             # scripts/valgrind.sh: memcheck over the host build
  libbenchmark-dev                     # bench/micro
  openmpi-bin libopenmpi-dev           # mpirun launching and the MPI_Allreduce peer
  iproute2 procps                      # tests read /proc; ip(8) and tc(8) build the fabric testbed
  hipcc libamdhip64-dev                # the HIP device kernels (kernels/hip), built for AMD GPUs
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
