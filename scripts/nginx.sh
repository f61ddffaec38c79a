#!/usr/bin/env bash
# Installs Debian's nginx for the web-tier tests (two fxdesk-web processes behind a real reverse
# proxy) when it is missing. Only the binary is used: each test writes its own config and prefix
# directory and runs its own nginx on a free loopback port; the system service is never started.
# Never fatal: where it cannot be installed, those tests skip and say why.
command -v nginx >/dev/null 2>&1 && exit 0
[ -x /usr/sbin/nginx ] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "nginx: no apt-get; the web-tier tests will skip" >&2; exit 0; }
echo "nginx: installing nginx-light for the web-tier tests" >&2
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d 101 keeps the package from starting the system service on install.
policy=/usr/sbin/policy-rc.d
created=""
if [ ! -e "$policy" ] && [ -w /usr/sbin ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1; fi
install() { apt-get install -y -qq "$1" >/dev/null 2>&1; }
{ install nginx-light || install nginx || { apt-get update -qq >/dev/null 2>&1 && { install nginx-light || install nginx; }; }; } \
  || echo "nginx: nginx could not be installed; the web-tier tests will skip" >&2
[ -n "$created" ] && rm -f "$policy"
exit 0
