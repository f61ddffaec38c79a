package eod

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// insertPrices is the one statement that writes fx_eod_price, into a day nobody captured yet.
const insertPrices = "INSERT INTO `fx_eod_price` (`tradingDay`, `symbol`, `bid`, `ask`, `quotedAt`, `capturedBy`) VALUES "
const insertPricesTail = " ON DUPLICATE KEY UPDATE `tradingDay` = `tradingDay`"

// captureAttempts bounds how often a capture that lost a deadlock to a racing one looks again.
const captureAttempts = 6

// Capture records the closing prices of day: every catalog instrument's last quote in prices (a
// closed market's last quote included; a halted or unquoted symbol is left out). by names the
// capturing process. It returns how many prices it offered.
//
// A day's prices are one capture's, the first: a capture that finds the day captured — by an
// earlier one, or by one racing it — leaves it whole and adds nothing, not even a symbol the first
// lacked. A freeze that read the day's prices has marked nothing at a symbol missing then; a
// price added later would sit in the day beside marks that did not use it.
func Capture(ctx context.Context, db *sql.DB, day fx.Rollover, prices tick.Prices, by string) (int, error) {
	cat, err := catalog.Load(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("capture closing prices: %w", err)
	}
	var sb strings.Builder
	var args []any
	n := 0
	for _, in := range cat.List {
		symbol := in.Symbol
		q, ok := prices.LastTick(symbol)
		if !ok || prices.SymbolState(symbol) == tick.QuotingHalted || q.Bid <= 0 || q.Ask <= 0 {
			continue
		}
		if n > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?)")
		quoted := q.ProviderTime
		if quoted.IsZero() {
			quoted = q.ReceivedAt
		}
		args = append(args, day.Date, symbol,
			decimal.NewFromFloat(q.Bid).Round(int32(in.Digits)), decimal.NewFromFloat(q.Ask).Round(int32(in.Digits)),
			quoted.UTC(), by)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	for attempt := 1; ; attempt++ {
		err := captureDay(ctx, db, day, sb.String(), args)
		if store.IsDeadlock(err) && attempt < captureAttempts {
			// A racing capture took the day; the next look finds it taken. Looking at once can
			// take the empty range's gap lock again before the winner's insert resumes, and meet
			// it in a second deadlock: wait a little, longer each time, a random part of it.
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(attempt) * (5*time.Millisecond + time.Duration(rand.IntN(20))*time.Millisecond)):
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("capture closing prices of %s: %w", day.Date, err)
		}
		return n, nil
	}
}

// captureDay writes values into day unless the day has prices already. The locking read holds the
// day's empty range, so two captures of one day meet there: one waits for the other's commit and
// finds the day taken, or is the deadlock victim and looks again.
func captureDay(ctx context.Context, db *sql.DB, day fx.Rollover, values string, args []any) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var captured int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_eod_price` WHERE `tradingDay` = ? FOR UPDATE", day.Date).Scan(&captured); err != nil {
		return err
	}
	if captured > 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString(insertPrices)
	q.WriteString(values)
	q.WriteString(insertPricesTail)
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return err
	}
	return tx.Commit()
}

// Price is one symbol's closing price.
type Price struct {
	Symbol     string          `json:"symbol"`
	Bid        decimal.Decimal `json:"bid"`
	Ask        decimal.Decimal `json:"ask"`
	QuotedAt   time.Time       `json:"quotedAt"`
	CapturedAt time.Time       `json:"capturedAt"`
	CapturedBy string          `json:"capturedBy"`
}

// Closing is a day's captured prices as a price view: the freeze marks and converts through it
// exactly as a fill does through the engine's.
type Closing struct {
	Day    string
	Prices map[string]Price
}

// LoadClosing reads day's captured prices; an empty view when nobody captured them.
func LoadClosing(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, day string) (*Closing, error) {
	rows, err := q.QueryContext(ctx, "SELECT `symbol`, `bid`, `ask`, `quotedAt`, `capturedAt`, `capturedBy` FROM `fx_eod_price` WHERE `tradingDay` = ?", day)
	if err != nil {
		return nil, fmt.Errorf("closing prices of %s: %w", day, err)
	}
	defer rows.Close()
	c := &Closing{Day: day, Prices: map[string]Price{}}
	for rows.Next() {
		var p Price
		if err := rows.Scan(&p.Symbol, &p.Bid, &p.Ask, &p.QuotedAt, &p.CapturedAt, &p.CapturedBy); err != nil {
			return nil, fmt.Errorf("closing prices of %s: %w", day, err)
		}
		c.Prices[p.Symbol] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("closing prices of %s: %w", day, err)
	}
	return c, nil
}

// LastTick is symbol's closing price as a quote. Its ReceivedAt is now: a frozen price is never
// stale, it is the price of its day.
func (c *Closing) LastTick(symbol string) (tick.Quote, bool) {
	p, ok := c.Prices[symbol]
	if !ok {
		return tick.Quote{}, false
	}
	bid, _ := p.Bid.Float64()
	ask, _ := p.Ask.Float64()
	return tick.Quote{Bid: bid, Ask: ask, ReceivedAt: time.Now(), ProviderTime: p.QuotedAt}, true
}

// SymbolState is Quoting for every captured symbol.
func (c *Closing) SymbolState(symbol string) tick.State {
	if _, ok := c.Prices[symbol]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}
