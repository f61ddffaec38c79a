package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"fxdesk/internal/auth"
	"fxdesk/internal/forward"
	"fxdesk/internal/fx"
)

// routes lists every route the desk serves.
func routes(d Deps) http.Handler {
	h, _ := guardedRoutes(d)
	return h
}

// guardedRoutes is routes with what each guarded route needs, for the tests that walk them.
func guardedRoutes(d Deps) (http.Handler, guards) {
	g := guards{}
	return guardedRouter(d, g), g
}

func guardedRouter(d Deps, g guards) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	fail := func(w http.ResponseWriter, r *http.Request, err error) { writeError(r.Context(), d.Log, w, err) }
	// The front door (docs/architecture.md, «The front door»), before anything reads the request:
	// the client address's rate, the answer's deadline and the body's bound, the same on every
	// process.
	r.Use(perAddress(d.Log, newRateLimits(d.Limits.RatePerAddr, rateKeys), d.Limits.TrustedProxies, d.Metrics))
	r.Use(writeDeadline(d.Limits.WriteTimeout))
	bodyLimit := d.Limits.BodyBytes
	if bodyLimit <= 0 {
		bodyLimit = defaultBodyBytes
	}
	r.Use(bodyRules(d.Log, bodyLimit, d.Metrics))
	// The node-to-node header is for web processes only: a client's copy is removed here, and
	// one that does not verify is refused before anything else reads the request.
	r.Use(forward.Edge(d.Forward, d.Log, fail))
	// deskPriced marks the routes only the lease holder can serve: on a follower they are
	// forwarded to it (when forwarding is on); everything else is served where it lands.
	deskPriced := func(next http.Handler) http.Handler { return next }
	if d.Forward != nil {
		deskPriced = d.Forward.Desk(fail)
	}

	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(r.Context(), d.Log, w, fx.Errorf(fx.ENOTFOUND, "No route %s %s.", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(r.Context(), d.Log, w, fx.Errorf(fx.EINVALID, "Method %s is not allowed on %s.", r.Method, r.URL.Path))
	})

	r.Get("/healthz", handleHealthz())
	r.Get("/readyz", handleReadyz(d.DB, d.Desk, d.RiskView))
	// Every /api route needs a bearer token. A trader's route names the scope it needs (read or
	// trade), an admin route the permission (docs/identity.md, «Roles»): the guard records each
	// name in g, and a test walks the router so that no route can be added without one.
	authn := requireToken(d.Log, d.Auth, newRateLimits(d.Limits.RatePerToken, rateKeys), d.Limits.TrustedProxies, d.Metrics)
	// Metrics tell an outsider how busy the desk is and who holds it: staff only here, and
	// token-free only on FXDESK_METRICS_ADDR, which the process binds to loopback by default.
	g.under("").permit(r.With(authn), d.Log, auth.PermRead).Method(http.MethodGet, "/metrics", d.Metrics.Handler())

	r.Route("/api/fx", func(r chi.Router) {
		r.Use(authn)
		trader := g.under("/api/fx")
		read, trade := trader.scope(r, d.Log, auth.ScopeRead), trader.scope(r, d.Log, auth.ScopeTrade)
		trade.Post("/accounts", handleCreateAccount(d.Log, d.Trading))
		read.Get("/accounts", handleAccounts(d.Log, d.Trading))
		read.Get("/accounts/{id}", handleAccount(d.Log, d.Trading))
		// Statements read the frozen days (docs/eod.md, «Statements»): any process serves them.
		read.Get("/accounts/{id}/statement", handleStatement(d.Log, d.DB, false))
		trade.With(deskPriced).Post("/accounts/{id}/withdraw", handleWithdraw(d.Log, d.Trading))
		trade.With(deskPriced).Post("/orders", handlePlaceOrder(d.Log, d.Trading, d.Metrics))
		trade.With(deskPriced).Post("/orders/oco", handlePlaceOCO(d.Log, d.Trading, d.Metrics))
		read.Get("/orders", handleOrders(d.Log, d.Trading))
		trade.With(deskPriced).Delete("/orders/{id}", handleCancelOrder(d.Log, d.Trading))
		trade.With(deskPriced).Patch("/orders/{id}", handleModifyOrder(d.Log, d.Trading))
		read.Get("/positions", handlePositions(d.Log, d.Trading))
		trade.With(deskPriced).Patch("/positions/{id}", handleModifyPosition(d.Log, d.Trading))
		trade.With(deskPriced).Post("/positions/{id}/close", handleClosePosition(d.Log, d.Trading, d.Metrics))
		trade.With(deskPriced).Post("/positions/{id}/close-by", handleCloseBy(d.Log, d.Trading))
		read.Get("/deals", handleDeals(d.Log, d.Trading))
		read.Get("/events", handleEvents(d.Log, d.DB))
		read.Get("/events/stream", handleEventsStream(d.Log, d.DB, d.Events, d.Metrics))
		read.Get("/symbols", handleSymbols(d.Log, d.Catalog, d.Trading, d.Quotes))
		read.Get("/quotes", handleQuotes(d.Log, d.Catalog, d.Trading, d.Quotes))
		read.Get("/markets/stream", handleMarketsStream(d.Log, d.Catalog, d.Rail))
		read.Get("/candles", handleCandles(d.Log, d.Catalog, d.Candles))
	})

	operatorPages(r, d.Log, d.Auth, authn, g.under("/admin"), handleStatusPage(d.Log, d))

	r.Route("/api/admin/fx", func(r chi.Router) {
		r.Use(authn, tellAdminWrites(d.AdminWritten))
		admin := g.under("/api/admin/fx")
		need := func(p auth.Permission) chi.Router { return admin.permit(r, d.Log, p) }
		read := need(auth.PermRead)
		// Client money moved by staff: at once up to the four-eyes threshold, above it a money
		// request another finance user approves (docs/identity.md, «Four eyes on client money»).
		// A withdrawal, and an approval that may make one, is priced by the holder like the
		// trader's own withdrawal.
		need(auth.PermMoney).Post("/accounts/{id}/deposit", handleStaffMove(d.Log, d.Trading.Finance().Deposit))
		need(auth.PermMoney).With(deskPriced).Post("/accounts/{id}/withdraw", handleStaffMove(d.Log, d.Trading.Finance().Withdraw))
		need(auth.PermMoney).Get("/money-requests", handleMoneyRequests(d.Log, d.Trading.Finance()))
		need(auth.PermMoney).With(deskPriced).Post("/money-requests/{id}/approve", handleApproveMoneyRequest(d.Log, d.Trading.Finance()))
		need(auth.PermMoney).Post("/money-requests/{id}/reject", handleRejectMoneyRequest(d.Log, d.Trading.Finance()))
		read.Get("/accounts", handleAdminAccounts(d.Log, d.Trading))
		read.Get("/settings", handleSettings(d.Log, d.Settings))
		// A setting names its own permission (hedge settings the dealer's, the four-eyes
		// threshold the superadmin's, the rest the risk desk's): the route lets in any of them,
		// and the handler checks each name it is given.
		admin.permit(r, d.Log, auth.PermLimits, auth.PermHedge, auth.PermTokens).Put("/settings", handlePutSettings(d.Log, d.Settings))
		read.Get("/instruments", handleInstruments(d.Log, d.Catalog))
		need(auth.PermLimits).Put("/instruments", handlePutInstruments(d.Log, d.Catalog))
		read.Get("/account-groups", handleAccountGroups(d.Log, d.Catalog))
		need(auth.PermLimits).Post("/account-groups", handleCreateAccountGroup(d.Log, d.Catalog))
		read.Get("/account-groups/{name}", handleAccountGroup(d.Log, d.Catalog))
		// A change of a group and a move are served by the holder, so its next order is routed
		// under the group as changed; their margin terms reach its risk engine from the audit
		// log, as every admin change does, wherever it is served (docs/groups.md).
		need(auth.PermLimits).With(deskPriced).Put("/account-groups/{name}", handleUpdateAccountGroup(d.Log, d.Catalog))
		need(auth.PermLimits).With(deskPriced).Patch("/account-groups/{name}", handleUpdateAccountGroup(d.Log, d.Catalog))
		need(auth.PermLimits).Delete("/account-groups/{name}", handleDeleteAccountGroup(d.Log, d.Catalog))
		need(auth.PermRouting).With(deskPriced).Post("/accounts/{id}/group", handleMoveAccount(d.Log, d.Catalog, d.Trading))
		need(auth.PermAccountState).Put("/accounts/{id}/state", handleSetAccountState(d.Log, d.Catalog, d.Trading))
		read.Get("/symbol-groups", handleSymbolGroups(d.Log, d.Catalog))
		need(auth.PermLimits).Put("/symbol-groups/{name}", handlePutSymbolGroup(d.Log, d.Catalog))
		need(auth.PermLimits).Delete("/symbol-groups/{name}", handleDeleteSymbolGroup(d.Log, d.Catalog))
		read.Get("/account-groups/{name}/overrides", handleOverrides(d.Log, d.Catalog))
		need(auth.PermOverrides).Put("/account-groups/{name}/overrides/symbols/{symbol}", handlePutOverride(d.Log, d.Catalog))
		need(auth.PermOverrides).Delete("/account-groups/{name}/overrides/symbols/{symbol}", handleDeleteOverride(d.Log, d.Catalog))
		need(auth.PermOverrides).Put("/account-groups/{name}/overrides/symbol-groups/{group}", handlePutOverride(d.Log, d.Catalog))
		need(auth.PermOverrides).Delete("/account-groups/{name}/overrides/symbol-groups/{group}", handleDeleteOverride(d.Log, d.Catalog))
		read.Get("/accounts/{id}/effective", handleEffective(d.Log, d.Catalog))
		read.Get("/accounts/{id}/profile", handleAccountProfile(d.Log, d.Trading))
		read.Get("/accounts/{id}/statement", handleStatement(d.Log, d.DB, true))
		// Routing rules: the holder routes every order, so a change is served there and applies
		// to its next order at once (docs/routing.md).
		read.Get("/account-groups/{name}/routing", handleRoutingRules(d.Log, d.Catalog))
		need(auth.PermRouting).With(deskPriced).Post("/account-groups/{name}/routing", handleCreateRoutingRule(d.Log, d.Catalog))
		need(auth.PermRouting).With(deskPriced).Put("/account-groups/{name}/routing/order", handleReorderRoutingRules(d.Log, d.Catalog))
		need(auth.PermRouting).With(deskPriced).Put("/account-groups/{name}/routing/{id}", handleUpdateRoutingRule(d.Log, d.Catalog))
		need(auth.PermRouting).With(deskPriced).Delete("/account-groups/{name}/routing/{id}", handleDeleteRoutingRule(d.Log, d.Catalog))
		// Dealer actions are desk-priced like the trader's own close and cancel.
		need(auth.PermDealing).With(deskPriced).Post("/positions/{id}/close", handleDealerClose(d.Log, d.Trading, d.Metrics))
		need(auth.PermDealing).With(deskPriced).Post("/orders/{id}/cancel", handleDealerCancel(d.Log, d.Trading))
		need(auth.PermDealing).With(deskPriced).Patch("/orders/{id}", handleDealerModifyOrder(d.Log, d.Trading))
		read.Get("/desk", handleDesk(d))
		// Price sources live in the holder's tick engine: reads and pins are served there
		// (docs/operations.md, «Price sources»); a pin is audited and stored so the next holder
		// applies it too.
		read.With(deskPriced).Get("/price-sources", handlePriceSources(d.Log, d.PriceSources))
		read.With(deskPriced).Get("/price-sources/rejected", handleRejectedTicks(d.Log, d.PriceSources))
		need(auth.PermDealing).With(deskPriced).Put("/price-sources/symbols/{symbol}", handlePutPriceSourcePin(d.Log, d.PriceSources))
		read.Get("/pnl", handlePnL(d.Log, d))
		// The daily desk report reads the frozen end of day (docs/eod.md): the dealer's P&L's
		// readers read it, on any process.
		read.Get("/eod", handleEOD(d.Log, d.DB))
		read.Get("/eod/accounts", handleEODAccounts(d.Log, d.DB))
		read.Get("/eod/days", handleEODDays(d.Log, d.DB))
		read.Get("/hedge-book", handleHedgeBook(d.Log, d.Hedge))
		read.Get("/audit", handleAudit(d.Log, d.DB))
		read.Get("/alerts", handleAlerts(d.Log, d.Alerts))
		// The host platform's webhooks (docs/events.md); served by any process. Where the
		// desk's events go is the integration's setup, the superadmin's like its tokens.
		read.Get("/webhooks", handleWebhooks(d.Log, d.Webhooks))
		need(auth.PermTokens).Post("/webhooks", handleCreateWebhook(d.Log, d.Webhooks))
		need(auth.PermTokens).Patch("/webhooks/{id}", handleUpdateWebhook(d.Log, d.Webhooks))
		read.Get("/webhooks/{id}/dead-letters", handleDeadLetters(d.Log, d.Webhooks))
		need(auth.PermTokens).Post("/webhooks/{id}/dead-letters/{eventId}/replay", handleReplayDeadLetter(d.Log, d.Webhooks))
		// Tokens over the API (docs/operations.md, «Tokens over the API»); served by any process,
		// each issue and revoke audited with the calling token as its actor.
		need(auth.PermTokens).Post("/tokens", handleCreateToken(d.Log, d.DB))
		need(auth.PermTokens).Get("/tokens", handleTokens(d.Log, d.DB))
		need(auth.PermTokens).Delete("/tokens/{id}", handleRevokeToken(d.Log, d.DB, d.Auth, d.TokenRevoked))
		need(auth.PermDealing).Post("/alerts/{id}/ack", handleAckAlert(d.Log, d.Alerts, func(r *http.Request) string {
			return "user-" + strconv.FormatInt(principal(r.Context()).UserID, 10)
		}))
	})
	return r
}
