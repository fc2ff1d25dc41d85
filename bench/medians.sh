# Sourced by the compare scripts. medians <files...>: the files hold "size time busbw"
# lines (one per size and run); prints "size median-time median-busbw" per size, sorted by
# size as text (for join).
medians() {
  local col
  local tmp
  tmp=$(mktemp "${TMPDIR:-/tmp}/medians.XXXXXX")
  for col in 2 3; do
    cat "$@" | sort -k1,1n -k"$col","$col"g | awk -v c="$col" '
      { v[$1] = v[$1] " " $c }
      END { for (s in v) { n = split(substr(v[s], 2), a, " ");
              print s, (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 } }' | sort -k1,1 > "$tmp.$col"
  done
  join "$tmp.2" "$tmp.3" | sort -k1,1
  rm -f "$tmp" "$tmp.2" "$tmp.3"
}
