#!/usr/bin/env bash
# Installs Debian's chromium for the status-page browser test when it is missing. Never fatal:
# where it cannot be installed, the test skips and says why.
command -v chromium >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "browser: no apt-get; the browser test will skip" >&2; exit 0; }
echo "browser: installing chromium for the status-page test" >&2
export DEBIAN_FRONTEND=noninteractive
{ apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; } \
  || echo "browser: chromium could not be installed; the browser test will skip" >&2
exit 0
