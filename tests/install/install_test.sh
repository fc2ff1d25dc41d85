#!/usr/bin/env bash
# install_test.sh <build dir> <consumer source dir> <work dir>: installs the build into a
# fresh prefix, checks the installed files (soname, the librccl.so link, the headers, and in
# the CUDA build libnccl.so.2 with its CUDA <nccl.h>),
# then configures, builds and runs a downstream project that uses find_package(rccl).
set -euo pipefail
build=$1 consumer=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
lib=$(find "$prefix" -name librccl.so.1 -print -quit)
[ -n "$lib" ] || { echo "install_test: no librccl.so.1 under $prefix" >&2; exit 1; }
libdir=$(dirname "$lib")
[ -L "$libdir/librccl.so" ] || { echo "install_test: $libdir/librccl.so is not a link" >&2; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ { print $2 }')
[ "$soname" = librccl.so.1 ] || { echo "install_test: SONAME is '$soname'" >&2; exit 1; }
for h in include/rccl/rccl.h include/rccl.h include/nccl.h include/tempo/tempo.h; do
  [ -f "$prefix/$h" ] || { echo "install_test: $h not installed" >&2; exit 1; }
done
# The CUDA build also installs libnccl.so.2, and its <nccl.h> takes cudaStream_t.
nccl=$(find "$prefix" -name libnccl.so.2 -print -quit)
if [ -n "$nccl" ]; then
  soname=$(objdump -p "$nccl" | awk '/SONAME/ { print $2 }')
  [ "$soname" = libnccl.so.2 ] || { echo "install_test: libnccl SONAME is '$soname'" >&2; exit 1; }
  grep -q "ncclComm_t comm, cudaStream_t stream);" "$prefix/include/nccl.h" ||
    { echo "install_test: the installed nccl.h is not the CUDA build's" >&2; exit 1; }
fi
cmake -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer.log"
cmake --build "$work/consumer" >> "$work/consumer.log"
LD_LIBRARY_PATH="$libdir" TEMPO_TRANSPORT=loopback "$work/consumer/consumer"
