#!/usr/bin/env bash
# Builds the FIX conformance peer (e2e/testdata/fixpeer/peer.cpp) on Debian's C++ QuickFIX — a FIX
# engine that shares no code with the desk's QuickFIX/Go — into bin/fixpeer/, installing
# libquickfix-dev and g++ with apt when they are missing (sudo when not root). Idempotent: it
# rebuilds only when the source or the library changed. The peer's FIX 4.4 data dictionary is
# QuickFIX's FIX44.xml, which the Debian package does not ship: it is copied from the quickfixgo
# module the desk already requires (the same file format, the FIX 4.4 specification).
# `make test` runs it and makes e2e's conformance tests required (FXDESK_CONFORMANCE=require):
# where it cannot build the peer it says why here, and those tests fail saying so.
set -uo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
src=e2e/testdata/fixpeer/peer.cpp
out=bin/fixpeer
say() { echo "quickfix: $*" >&2; }
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else say "not root and no sudo: cannot run $*"; return 1; fi
}
if [ ! -e /usr/include/quickfix/Session.h ] || ! command -v g++ >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { say "no apt-get: install libquickfix-dev and g++ by hand; the FIX conformance tests need them"; exit 0; }
  say "installing libquickfix-dev and g++ for the FIX conformance tests"
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { as_root apt-get install -y -qq libquickfix-dev g++ >/dev/null 2>&1; }
  apt_install || { as_root apt-get update -qq >/dev/null 2>&1 && apt_install; } || { say "libquickfix-dev could not be installed"; exit 0; }
fi
sum=$(sha256sum "$src" | cut -d' ' -f1)
lib=$(dpkg-query -W -f='${Version}' libquickfix-dev 2>/dev/null || echo unknown)
if [ -x "$out/fixpeer" ] && [ -s "$out/FIX44.xml" ] && [ "$(cat "$out/peer.cpp.sha256" 2>/dev/null)" = "$sum" ] &&
  [ "$(cat "$out/libquickfix.version" 2>/dev/null)" = "$lib" ]; then
  exit 0
fi
mkdir -p "$out"
spec="$("$GO" mod download -json github.com/quickfixgo/quickfix 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/spec/FIX44.xml"
[ -s "$spec" ] || { say "no FIX44.xml in the quickfixgo module ($spec)"; exit 0; }
install -m 0644 "$spec" "$out/FIX44.xml"
# The library's headers declare dynamic exception specifications, which C++17 removed.
if ! g++ -std=gnu++14 -O1 -Wall -Wno-deprecated -o "$out/fixpeer" "$src" -lquickfix -lpthread; then
  say "the peer did not compile"; rm -f "$out/fixpeer"; exit 0
fi
echo "$sum" >"$out/peer.cpp.sha256"
echo "$lib" >"$out/libquickfix.version"
say "built $out/fixpeer"
