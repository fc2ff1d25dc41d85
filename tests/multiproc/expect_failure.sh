#!/usr/bin/env bash
# expect_failure.sh <regex> -- <command...>: passes when the command exits non-zero AND its
# output matches <regex>; a command that succeeds, or fails for another reason, fails the test.
set -u
re=$1; shift; [ "$1" = "--" ] && shift
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
if [ "$rc" = 0 ]; then echo "expect_failure: command exited 0; expected a failure" >&2; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq "$re"; then echo "expect_failure: exit $rc but no line matches /$re/" >&2; exit 1; fi
echo "expect_failure: exit $rc and /$re/ matched, as expected"
