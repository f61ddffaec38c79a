# fxdesk — two commands: `make run` runs the desk, `make test` runs the tests.
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
BIN := bin

.PHONY: run test build services bench soak

services:
	@./scripts/services.sh

build:
	$(GO) build -o $(BIN)/fxdesk-web ./cmd/web
	$(GO) build -o $(BIN)/fxdesk-cron ./cmd/cron
	$(GO) build -o $(BIN)/fxdesk-idp ./cmd/idp

# Single-process desk: lease, HTTP API, the bundled feed simulator and the in-process venue
# simulator (the demo trader's A-book account trades there), with the markets open whatever the
# day and demo data seeded.
run: services build
	FXDESK_DEMO=on FXDESK_CALENDAR=always-open FXDESK_FEED=sim FXDESK_VENUE=sim ./$(BIN)/fxdesk-web

test: services
	@./scripts/browser.sh
	@./scripts/nginx.sh
	@GO=$(GO) ./scripts/quickfix.sh
	$(GO) vet ./...
	@GO=$(GO) ./scripts/staticcheck.sh >/dev/null
	$(shell $(GO) env GOPATH)/bin/staticcheck ./...
	FXDESK_CONFORMANCE=require $(GO) test -count=1 -timeout 20m ./...

bench: services
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Chaos soak (internal/testkit/soak, run by cmd/soak; docs/soak.md): two web processes and the cron process under trader load
# and seeded faults, invariants checked every 30 s and at the end. SEED= replays a schedule.
# CLUSTER=galera,sentinel runs it on a Galera cluster and Redis Sentinel (docs/cluster.md).
# VENUE=rest|fix forces the A-book's venue, VENUE=seed picks by seed (FIX for a third of seeds).
SECONDS ?= 60
SEED ?=
CLUSTER ?=
VENUE ?= seed
soak: services
	$(GO) run ./cmd/soak -seconds=$(SECONDS) $(if $(SEED),-seed=$(SEED)) $(if $(CLUSTER),-cluster=$(CLUSTER)) $(if $(VENUE),-venue=$(VENUE))
