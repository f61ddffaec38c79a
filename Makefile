# fxdesk — two commands: `make run` runs the desk, `make test` runs the tests.
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
BIN := bin

.PHONY: run test build services bench soak year

services:
	@./scripts/services.sh

build:
	$(GO) build -o $(BIN)/fxdesk-web ./cmd/web
	$(GO) build -o $(BIN)/fxdesk-cron ./cmd/cron
	$(GO) build -o $(BIN)/fxdesk-idp ./cmd/idp

# Single-process desk: lease, HTTP API, the bundled feed simulator and the in-process venue
# simulator (the demo trader's A-book account trades there), with the markets open whatever the
# day and demo data seeded. Beside it, the bundled test identity provider stands in for the host
# platform's sign-in (docs/identity.md): the desk accepts the tokens it mints; it stops with the desk.
IDP_ADDR ?= 127.0.0.1:4010
run: services build
	@./$(BIN)/fxdesk-idp -addr $(IDP_ADDR) -issuer fxdesk-idp -audience fxdesk & idp=$$!; trap "kill $$idp 2>/dev/null" EXIT INT TERM; \
	FXDESK_DEMO=on FXDESK_CALENDAR=always-open FXDESK_PRICE_SOURCES=primary=sim,backup=sim FXDESK_VENUE=sim \
	FXDESK_JWT_JWKS_URL=http://$(IDP_ADDR)/.well-known/jwks.json FXDESK_JWT_ISSUER=fxdesk-idp FXDESK_JWT_AUDIENCE=fxdesk \
	./$(BIN)/fxdesk-web

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

# A generated broker's history (internal/yeargen, cmd/fxgen; docs/operations.md, «A year of data»)
# in database YEAR_DB, created and migrated if missing; it must hold no accounts (drop it first to
# regenerate). YEAR_SIZE=month|small for less; the same YEAR_SEED writes the same history.
YEAR_DB ?= fxdesk_year
YEAR_DSN ?= root@tcp(127.0.0.1:3306)/$(YEAR_DB)
YEAR_SIZE ?= year
YEAR_SEED ?= 1
year: services
	$(GO) run ./cmd/fxgen -dsn '$(YEAR_DSN)' -size $(YEAR_SIZE) -seed $(YEAR_SEED)
