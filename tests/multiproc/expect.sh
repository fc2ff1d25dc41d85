#!/usr/bin/env bash
# expect.sh fail|ok <regex> -- <command...>: passes when the command exits non-zero (fail)
# or zero (ok) AND its output matches <regex>; any other outcome fails the test.
set -u
want=$1 re=$2; shift 2; [ "$1" = "--" ] && shift
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
# 77 is a skip (the command could not run here, and said why): ctest's SKIP_RETURN_CODE.
if [ "$rc" = 77 ]; then echo "expect: the command skipped (exit 77)" >&2; exit 77; fi
if [ "$want" = fail ] && [ "$rc" = 0 ]; then echo "expect: command exited 0; expected a failure" >&2; exit 1; fi
if [ "$want" = ok ] && [ "$rc" != 0 ]; then echo "expect: command exited $rc; expected success" >&2; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq "$re"; then echo "expect: exit $rc but no line matches /$re/" >&2; exit 1; fi
echo "expect: exit $rc and /$re/ matched, as expected"
