#!/usr/bin/env bash
# Builds the C# bindings, their tests and examples with Mono's compiler and runs them against a
# built libsa.so. Usage: test.sh LIBDIR [OUTDIR]
#   LIBDIR  the directory that holds libsa.so
#   OUTDIR  where the assemblies go (default LIBDIR/csharp-out); nothing is written to the sources
# The model is models/sa-default-q8_0.gguf of this repository, or $SA_MODEL.
# Exits 0 when everything passes, 77 (skip) when mcs or mono is missing, 1 otherwise.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 LIBDIR [OUTDIR]" >&2
  exit 2
fi
for tool in mcs mono; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "test.sh: '$tool' not found (install mono-devel); skipping the C# bindings"
    exit 77
  fi
done

here=$(cd "$(dirname "$0")" && pwd)
libdir=$(cd "$1" && pwd)
out=${2:-$libdir/csharp-out}
model=${SA_MODEL:-$here/../../models/sa-default-q8_0.gguf}
if [ ! -f "$libdir/libsa.so" ]; then
  echo "test.sh: no libsa.so in $libdir" >&2
  exit 1
fi
mkdir -p "$out"

# C# 6 plus what Mono's compiler takes, so the same sources build with mcs and the .NET SDK.
mcs_flags=(-langversion:6 -warn:4 -warnaserror+ -debug)
mcs "${mcs_flags[@]}" -target:library -out:"$out/Sa.dll" "$here"/src/*.cs
mcs "${mcs_flags[@]}" -out:"$out/Sa.Tests.exe" -r:"$out/Sa.dll" "$here"/tests/*.cs
mcs "${mcs_flags[@]}" -out:"$out/Passkey.exe" -r:"$out/Sa.dll" "$here"/examples/Passkey/*.cs
mcs "${mcs_flags[@]}" -out:"$out/Chat.exe" -r:"$out/Sa.dll" "$here"/examples/Chat/*.cs

# DllImport("sa") → libsa.so through the loader's search path.
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

status=0
mono --debug "$out/Sa.Tests.exe" "$model" || status=1

echo "example Passkey:"
mono "$out/Passkey.exe" "$model" --length 1024 --seed 7 2>/dev/null || { echo "Passkey failed"; status=1; }

echo "example Chat:"
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
printf 'Hello! My name is Emma. I live in Oslo.\n' |
  mono "$out/Chat.exe" "$model" --store "$store/chat.db" --max 32 || status=1
# A second process resumes the conversation from the store.
reply=$(printf 'What is my name?\n' | mono "$out/Chat.exe" "$model" --store "$store/chat.db" --max 32 2>&1) || status=1
echo "$reply"
case $reply in
  *resumed*Emma*) ;;
  *) echo "Chat did not resume the conversation"; status=1 ;;
esac

if [ $status -eq 0 ]; then echo "C# bindings: all passed"; else echo "C# bindings: FAILED"; fi
exit $status
