#!/usr/bin/env bash
# Checks the dynamic symbol table of librccl against the public header:
#   (a) the SONAME is librccl.so.1 (or the 4th argument: libnccl.so.2 for the CUDA build);
#   (b) every C function declared in the header is exported as a weak ncclX/msccl* (nm type W)
#       with a strong pX twin (type T) at the same address, and every C++ function declared
#       after the extern "C" block (ncclCommDump) is exported, mangled, as a strong symbol;
#   (c) every tempoX function declared in the extension header (include/tempo/tempo.h) is
#       exported as a strong symbol, without a twin;
#   (d) nothing else is exported: only nccl*/pnccl*/msccl*/pmsccl* names declared in the
#       header and tempo* names declared in the extension header (so the headers and the
#       library cannot drift apart in either direction).
# The function lists are read from the headers themselves, so they can never be stale.
#
# usage: exports_test.sh <path/to/librccl.so.1> <path/to/include/rccl/rccl.h> <path/to/include/tempo/tempo.h> [soname]
set -euo pipefail

lib=${1:?usage: exports_test.sh <librccl.so> <rccl.h>}
header=${2:?usage: exports_test.sh <librccl.so> <rccl.h> <tempo.h>}
ext_header=${3:?usage: exports_test.sh <librccl.so> <rccl.h> <tempo.h>}
want_soname=${4:-librccl.so.1}
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

for tool in nm readelf c++filt; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found" >&2; exit 1; }
done
[[ -r $lib ]] || { echo "FAIL: cannot read $lib" >&2; exit 1; }
[[ -r $header ]] || { echo "FAIL: cannot read $header" >&2; exit 1; }
[[ -r $ext_header ]] || { echo "FAIL: cannot read $ext_header" >&2; exit 1; }

# ---- (a) SONAME ----
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[[ $soname == "$want_soname" ]] || fail "SONAME is '${soname:-<none>}', expected $want_soname"

# ---- names declared in the header ----
# A declaration starts in column 0 with its return type, then the name and '('. The extern "C"
# block holds the C API; declarations after it have C++ linkage.
decl_re='^[A-Za-z_][A-Za-z0-9_ *]*[ *](p?(nccl|msccl)[A-Za-z0-9_]*)\('
section() {  # section c|cxx: the header lines inside / after the extern "C" block
  awk -v want="$1" '
    /^extern "C" \{/ { state = "c"; next }
    /^\}[ \t]*\/\/ extern "C"/ { state = "cxx"; next }
    state == want { print }' "$header"
}
names_in() { sed -nE "s/${decl_re}.*/\1/p" | sort -u; }

mapfile -t c_all < <(section c | names_in)
mapfile -t cxx_all < <(section cxx | names_in)
c_base=() ; for n in "${c_all[@]}"; do [[ $n == p* ]] || c_base+=("$n"); done
(( ${#c_base[@]} > 0 )) || { echo "FAIL: no function declarations found in $header" >&2; exit 1; }

# The header must declare each twin too (applications and interposers use pX directly).
declared=" ${c_all[*]} ${cxx_all[*]} "
for n in "${c_base[@]}"; do
  [[ $declared == *" p$n "* ]] || fail "header declares $n but not p$n"
done

# ---- the library's exports ----
declare -A type addr
while read -r a t s; do
  s=${s%%@*}  # drop a symbol version, if any
  type[$s]=$t
  addr[$s]=$a
done < <(nm -D --defined-only "$lib")

# ---- (b) every C function: weak ncclX + strong pncclX at one address ----
for n in "${c_base[@]}"; do
  p=p$n
  if [[ -z ${type[$n]:-} ]]; then fail "$n is not exported"; continue; fi
  if [[ -z ${type[$p]:-} ]]; then fail "$p is not exported"; continue; fi
  [[ ${type[$n]} == W ]] || fail "$n has nm type ${type[$n]}, expected W (weak)"
  [[ ${type[$p]} == T ]] || fail "$p has nm type ${type[$p]}, expected T (strong)"
  [[ ${addr[$n]} == "${addr[$p]}" ]] || fail "$n (${addr[$n]}) and $p (${addr[$p]}) differ"
done

# ---- (b) C++ functions: exported by their mangled name ----
declare -A cxx_sym  # mangled symbol -> declared name
for s in "${!type[@]}"; do
  [[ $s == _Z* ]] || continue
  d=$(c++filt "$s")
  for n in "${cxx_all[@]}"; do
    if [[ $d == "$n("* ]]; then
      cxx_sym[$s]=$n
      [[ ${type[$s]} == T ]] || fail "$d has nm type ${type[$s]}, expected T"
    fi
  done
done
for n in "${cxx_all[@]}"; do
  found=0
  for s in "${!cxx_sym[@]}"; do [[ ${cxx_sym[$s]} == "$n" ]] && found=1; done
  (( found )) || fail "C++ function $n is not exported"
done

# ---- (c) Tempo's extensions: strong tempoX ----
mapfile -t ext_all < <(sed -nE 's/^[A-Za-z_][A-Za-z0-9_ *]*[ *](tempo[A-Za-z0-9_]*)\(.*/\1/p' "$ext_header" | sort -u)
(( ${#ext_all[@]} > 0 )) || fail "no tempo* function declarations found in $ext_header"
ext_declared=" ${ext_all[*]} "
for n in "${ext_all[@]}"; do
  if [[ -z ${type[$n]:-} ]]; then fail "$n is not exported"; continue; fi
  [[ ${type[$n]} == T ]] || fail "$n has nm type ${type[$n]}, expected T (strong)"
done

# ---- (d) nothing else is exported ----
for s in "${!type[@]}"; do
  [[ -n ${cxx_sym[$s]:-} ]] && continue
  if [[ $s == tempo* ]]; then
    [[ $ext_declared == *" $s "* ]] || fail "$s is exported but not declared in $(basename "$ext_header")"
  elif [[ ! $s =~ ^p?(nccl|msccl) ]]; then
    fail "unexpected export: $s ($(c++filt "$s"))"
  elif [[ $declared != *" $s "* ]]; then
    fail "$s is exported but not declared in $(basename "$header")"
  fi
done

if (( failures )); then
  echo "exports_test: $failures failure(s)" >&2
  exit 1
fi
echo "exports_test: OK: SONAME $soname; ${#c_base[@]} C functions exported as weak X + strong pX" \
     "twins; ${#cxx_all[@]} C++ function(s); ${#ext_all[@]} tempo extension(s); ${#type[@]} dynamic" \
     "symbols, none unexpected"
