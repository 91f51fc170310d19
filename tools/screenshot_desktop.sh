#!/usr/bin/env bash
# A screenshot of sa-desktop in the middle of a conversation, memory map visible: the app runs
# under a virtual X server (Xvfb) with a fresh store and settings, types a few scripted turns
# on the shipped model with a small cascade cache (so the map shows evicted tokens), and the
# screen is captured with ImageMagick's `import`.
# Needs: xvfb, imagemagick (Debian packages of the same names).
# Usage: tools/screenshot_desktop.sh [BUILD_DIR] [OUT_PNG]   (defaults: build, docs/sa-desktop.png)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/docs/sa-desktop.png}
app=$build/apps/sa-desktop/sa-desktop
[ -x "$app" ] || { echo "no $app (build with Qt 6 installed)" >&2; exit 1; }

work=$(mktemp -d)
display=:$((100 + RANDOM % 400))
width=1360 height=820
Xvfb "$display" -screen 0 "${width}x${height}x24" -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb=$!
app_pid=
cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
  kill "$xvfb" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${display#:}" ] && break; sleep 0.1; done

# A private settings and data folder, so the user's own are neither read nor changed.
export DISPLAY=$display QT_QPA_PLATFORM=xcb XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data
"$app" -geometry "${width}x${height}+0+0" --store "$work/demo.db" --memory cascade --cache 128 --sinks 16 \
  --map-layer 0 \
  --send "The harbour was quiet at dawn, and the fishing boats were still tied up along the old stone pier." \
  --send "What is the passkey? The passkey is 48213. Remember it." \
  --send "Who sailed out first that morning?" \
  --send "Tell me about the lighthouse keeper and his dog." \
  --send "What did the captain say to the crew?" \
  --send "What is the passkey?" >"$work/app.log" 2>&1 &
app_pid=$!
for _ in $(seq 240); do
  grep -q "script done" "$work/app.log" && break
  kill -0 "$app_pid" 2>/dev/null || { cat "$work/app.log" >&2; exit 1; }
  sleep 0.5
done
grep -q "script done" "$work/app.log" || { echo "the scripted turns did not finish" >&2; exit 1; }
sleep 1.5  # the last save and the memory map's redraw
mkdir -p "$(dirname "$out")"
import -window root "$out"
echo "wrote $out"
