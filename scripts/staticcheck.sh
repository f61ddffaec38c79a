#!/usr/bin/env bash
# Installs staticcheck at the pinned version into $(go env GOPATH)/bin when it is missing or at
# another version, and prints its path. `make test` runs it over ./... after go vet and keeps it
# clean: a finding that is a deliberate choice carries a //lint:ignore with its reason.
# The pin moves by hand, with the findings of the new version fixed in the same commit.
set -euo pipefail
VERSION=0.8.2 # honnef.co/go/tools v0.8.2, staticcheck 2026.2.2 (Go 1.26)
GO="${GO:-go}"
bin="$("$GO" env GOPATH)/bin/staticcheck"
if ! "$bin" -version 2>/dev/null | grep -qF "($VERSION)"; then
  echo "staticcheck: installing v$VERSION" >&2
  GOBIN="$(dirname "$bin")" GOFLAGS= "$GO" install "honnef.co/go/tools/cmd/staticcheck@v$VERSION" >&2
fi
echo "$bin"
