#!/usr/bin/env bash
# sa-chat's conversation survives a restart: a piped first run says something and quits; a
# second run with the same store and session resumes exactly the saved history and goes on.
# (The model's answers are not checked, only that the state persisted.)
# Usage: sa_chat_persists.sh SA_CHAT_BINARY
set -euo pipefail
chat=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/chat.db"

first=$(printf 'Hello! My name is Emma.\n/quit\n' | "$chat" --store "$db" --session ctest -n 24 -t 2)
echo "$first"
grep -q "new session 'ctest'" <<<"$first"
saved=$(sed -n "s/.*saved session 'ctest' to .*: \([0-9]*\) tokens.*/\1/p" <<<"$first")
[ -n "$saved" ] && [ "$saved" -gt 10 ]

second=$(printf '/sessions\nWhat is my name?\n/quit\n' | "$chat" --store "$db" --session ctest -n 24 -t 2)
echo "$second"
grep -q "resumed session 'ctest' from .*: $saved tokens" <<<"$second"
grep -Eq "^> +ctest +$saved tokens +cascade" <<<"$second"
again=$(sed -n "s/.*saved session 'ctest' to .*: \([0-9]*\) tokens.*/\1/p" <<<"$second")
[ "$again" -gt "$saved" ]
echo "sa-chat session persisted: $saved tokens, then $again"
