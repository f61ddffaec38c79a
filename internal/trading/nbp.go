package trading

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
)

// Negative balance protection limits a client's loss to the account's funds, per account: when a
// close leaves an account of a protected group below zero and with no OPEN position left, one
// ADJUSTMENT deal brings the balance back to exactly zero and the desk bears the difference
// (docs/groups.md, «Negative balance protection»; docs/operations.md).
//
// Why the last open position and not every close: a close that leaves positions open leaves
// value that may still cover the loss. A hedged pair's losing leg closed first takes the balance
// below zero while the winning leg holds the profit; resetting then paid the trader the losing
// leg and let them keep the winner, richer than without protection. So the reset waits for the
// close that leaves nothing open — the trader's, or the stop-out's last, since a stop-out that
// stops with positions open has left equity above its level, which covers the balance — and is
// the balance at that moment, once. Resting orders are not positions: they hold no value.
//
// The adjustment is posted in that close's own transaction — the same batch of the group
// commit, through the same ledger posting, under the same account lock and the same fence — not
// right after it: a close and its reset commit together or not at all, so no reader, no deposit
// and no crash ever finds the account flat and below zero in between, and no second process can
// post the reset twice or miss it. Whether the account still holds a position is read under that
// lock (every writer of an account's positions holds it): the batch's exposures of the account,
// kept by its writes, which a batch reads only when a close leaves a protected account below zero
// (book.Rows.OpenExposures). Its idempotency key names the close (nbpKey), so a close booked
// again can never reset twice either.
//
// Only a close resets: a deposit into an account below zero (positions open, or protection off)
// simply adds to the balance and never pays the negative balance for the desk; a swap may take
// an account with positions open below zero until they close.

// AlertNegativeBalanceReset is raised, after the commit, for every reset (warning).
const AlertNegativeBalanceReset = "negative-balance-reset"

// AlertInbox receives negative-balance-reset; *alert.Inbox satisfies it.
type AlertInbox interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
}

// NBPObserver counts the resets as they commit (metrics.Metrics).
type NBPObserver interface {
	// ObserveNBPReset records one reset of amount (positive: what the desk bore) in currency.
	ObserveNBPReset(currency string, amount decimal.Decimal)
}

// nbpReset is one reset, as the close's batch decided it.
type nbpReset struct {
	Account  int64
	Position int64
	Currency string
	Amount   decimal.Decimal // the ADJUSTMENT's amount: what the desk bears, positive
	Reason   fx.CloseReason
}

// nbpKey is the reset's idempotency key: one per close, named as the close's own deal is
// (closeKey: "close:<position>:<volume before>" → "nbp:<position>:<volume before>").
func nbpKey(dealKey string) string {
	return "nbp:" + strings.TrimPrefix(dealKey, "close:")
}

// resetDue is what negative balance protection pays after a close: the negative balance, when
// the account's group is protected and the close left no position open; nothing otherwise.
func resetDue(balance decimal.Decimal, protected, positionsOpen bool) (decimal.Decimal, bool) {
	if !protected || positionsOpen || !balance.IsNegative() {
		return decimal.Zero, false
	}
	return balance.Neg(), true
}

// protect posts negative balance protection's reset after the close of p that the batch just
// posted on the locked account a (its deal keyed dealKey), when resetDue says so. Its
// balance.adjustment event goes in with it.
func (w *closeWrite) protect(r *book.Rows, a *book.Account, p *book.Position, dealKey string) error {
	protected := r.Catalog.AccountGroup(a.Group).NegativeBalanceProtection
	if _, due := resetDue(a.Balance, protected, p.Status == fx.PositionOpen); !due {
		// Nothing to reset, or a partial close left this position open: no read needed.
		return nil
	}
	exps, read := r.OpenExposures(a.ID)
	if !read {
		return nil // the batch is planned again with them read, and this close applied again
	}
	amount, due := resetDue(a.Balance, protected, len(exps) > 0)
	if !due {
		return nil
	}
	order, position, sym := p.OrderID, p.ID, p.Symbol
	d := book.Deal{Type: fx.DealAdjustment, Amount: amount, OrderID: &order, PositionID: &position, Symbol: &sym,
		IdempotencyKey: nbpKey(dealKey), Comment: "negative balance protection"}
	told := d
	told.AccountID, told.Currency, told.BalanceAfter = a.ID, a.Currency, decimal.Zero
	if err := events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.Adjustment, Term: w.s.term(),
		Payload: events.BalanceOf(told)}); err != nil {
		return err
	}
	w.nbp = r.Post(a, d)
	w.reset = nbpReset{Account: a.ID, Position: p.ID, Currency: a.Currency, Amount: amount, Reason: w.reason}
	return nil
}

// reportReset tells the operator and the metrics of w's reset, once its batch committed. The
// alert is written in a transaction of its own, after the money: it reports the reset, it does
// not make it, and a failure to raise it is logged, never a reason to answer the close failed.
func (s *Service) reportReset(ctx context.Context, w *closeWrite) {
	if w.res.Adjustment == nil {
		return
	}
	rs := w.reset
	amount := fx.FormatMoney(rs.Currency, rs.Amount)
	s.log.WarnContext(ctx, "negative balance protection reset an account to zero", slog.Int64("account_id", rs.Account),
		slog.Int64("position_id", rs.Position), slog.String("amount", amount), slog.String("currency", rs.Currency), slog.String("reason", string(rs.Reason)))
	if s.nbpObs != nil {
		s.nbpObs.ObserveNBPReset(rs.Currency, rs.Amount)
	}
	if s.alerts == nil {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	msg := fmt.Sprintf("Negative balance protection reset account %d to 0 after its last open position %d closed (%s): the desk bore %s %s.",
		rs.Account, rs.Position, rs.Reason, amount, rs.Currency)
	details := map[string]any{"accountId": rs.Account, "positionId": rs.Position, "currency": rs.Currency, "amount": amount,
		"reason": string(rs.Reason), "dealId": w.res.Adjustment.ID}
	if err := s.alerts.Raise(actx, AlertNegativeBalanceReset, alert.Warning, msg, details); err != nil {
		s.log.ErrorContext(ctx, "negative-balance-reset alert not raised; the reset itself committed", slog.Int64("account_id", rs.Account), slog.Any("err", err))
	}
}

// NBPCost is what negative balance protection cost the desk in one currency over a period.
type NBPCost struct {
	Currency string `json:"currency"`
	Resets   int64  `json:"resets"`
	Amount   string `json:"amount"` // the sum of the resets' ADJUSTMENT deals
}

// NBPCostSince sums negative balance protection's resets since since, per account currency.
// The resets are found through the idempotency key's unique index (every one starts "nbp:"), so
// the read costs the resets, not the ledger.
func (s *Service) NBPCostSince(ctx context.Context, since time.Time) ([]NBPCost, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT `currency`, COUNT(*), SUM(`amount`) FROM `fx_deal` WHERE `idempotencyKey` LIKE 'nbp:%' "+
		"AND `type` = 'ADJUSTMENT' AND `createdAt` >= ? GROUP BY `currency` ORDER BY `currency`", since.UTC())
	if err != nil {
		return nil, fmt.Errorf("negative balance protection cost: %w", err)
	}
	defer rows.Close()
	out := []NBPCost{}
	for rows.Next() {
		var c NBPCost
		var sum decimal.Decimal
		if err := rows.Scan(&c.Currency, &c.Resets, &sum); err != nil {
			return nil, fmt.Errorf("negative balance protection cost: %w", err)
		}
		c.Amount = fx.FormatMoney(c.Currency, sum)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("negative balance protection cost: %w", err)
	}
	return out, nil
}
