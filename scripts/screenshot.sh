#!/usr/bin/env bash
# Takes a PNG screenshot of a local HTML page with Debian's headless Chromium, which it installs
# first if missing (scripts/install-deps.sh docs). This is how the picture of the profiler's
# timeline page in docs/profiling.md is made.
#
#   scripts/screenshot.sh PAGE.html[#FRAGMENT] OUT.png [WIDTH,HEIGHT]   # default 1400,900
#
# The page is opened from the file system with networking off, as a reader would open it; a
# fragment goes with it (the timeline page opens on the window #from=MS&to=MS).
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 PAGE.html[#FRAGMENT] OUT.png [WIDTH,HEIGHT]" >&2
  exit 2
fi
page=$(realpath "${1%%#*}")
fragment=""
case $1 in *'#'*) fragment="#${1#*#}" ;; esac
out=$(realpath -m "$2")
size=${3:-1400,900}
repo="$(dirname "${BASH_SOURCE[0]}")/.."
bash "$repo/scripts/install-deps.sh" docs >/dev/null
# --no-sandbox: Chromium's sandbox needs user namespaces, which containers and root lack.
chromium-headless-shell --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --proxy-server='127.0.0.1:9' --proxy-bypass-list='<-loopback>' \
  --window-size="$size" --virtual-time-budget=2000 --screenshot="$out" "file://$page$fragment" 2>/dev/null
test -s "$out"
echo "screenshot.sh: wrote $out"
