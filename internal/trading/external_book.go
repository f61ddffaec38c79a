package trading

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// The A-book as the reconciler, the hedge monitor and the dealer read it.

// LinkedPosition is one open EXTERNAL position as the reconciler and the hedge monitor see it.
type LinkedPosition struct {
	PositionID, OrderID, AccountID int64
	Symbol                         string
	Side                           fx.Side
	Volume                         decimal.Decimal
	ContractSize                   decimal.Decimal
	TradeID                        string
	// Booked are the venue fills the desk booked closes of this position from.
	Booked []int64
}

// VenueOrder is one EXTERNAL desk order as the reconciler sees it.
type VenueOrder struct {
	OrderID, AccountID int64
	Symbol             string
	Side               fx.Side
	Volume             decimal.Decimal
	Status             string
	SentAt             time.Time
	PositionID         int64
	PositionOpen       bool
	TradeID            string
	LastVenueTx        int64 // the newest venue transaction booked on its position
}

// VenueCursor is the last venue transaction the desk stored an effect of, for venueAccount,
// and the database clock now (the clock SENDING orders' sentAt is on).
func (b *ABook) VenueCursor(ctx context.Context, venueAccount string) (int64, time.Time, error) {
	s := b.s
	var cursor int64
	var now time.Time
	err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(`lastTransactionId`), 0), NOW(3) FROM `fx_venue_cursor` WHERE `venueAccount` = ?", venueAccount).Scan(&cursor, &now)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("venue cursor: %w", err)
	}
	return cursor, now, nil
}

// ExternalBook reads the desk's A-book: open EXTERNAL positions with the venue fills booked
// from each (every execution of a fill in several), SENDING orders, and the orders named by extraOrderIDs (client ids the venue's
// tagged trades carry).
func (b *ABook) ExternalBook(ctx context.Context, extraOrderIDs []int64) ([]LinkedPosition, []VenueOrder, error) {
	s := b.s
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("external book: begin: %w", err)
	}
	defer tx.Rollback()
	pos, err := store.QueryAll(ctx, tx, "external book: positions", func(sc store.Scanner) (LinkedPosition, error) {
		var p LinkedPosition
		err := sc.Scan(&p.PositionID, &p.OrderID, &p.AccountID, &p.Symbol, &p.Side, &p.Volume, &p.ContractSize, &p.TradeID)
		return p, err
	}, "SELECT p.`id`, p.`orderId`, p.`accountId`, p.`symbol`, p.`side`, p.`volume`, i.`contractSize`, p.`venueTradeId` "+
		"FROM `fx_position` p JOIN `fx_instrument` i ON i.`symbol` = p.`symbol` "+
		"WHERE p.`status` = 'OPEN' AND p.`venueTradeId` IS NOT NULL ORDER BY p.`id`")
	if err != nil {
		return nil, nil, err
	}
	if len(pos) > 0 {
		ids := make([]int64, len(pos))
		at := make(map[int64]int, len(pos))
		for i, p := range pos {
			ids[i], at[p.PositionID] = p.PositionID, i
		}
		fills, err := store.QueryAll(ctx, tx, "external book: booked fills", func(sc store.Scanner) (book.FillKey, error) {
			var k book.FillKey
			err := sc.Scan(&k.Position, &k.Tx)
			return k, err
		}, "SELECT `positionId`, `venueTransactionId` FROM `fx_deal` WHERE `positionId` IN ("+store.Placeholders(len(ids))+
			") AND `venueTransactionId` IS NOT NULL UNION ALL SELECT `positionId`, `venueTransactionId` FROM `fx_deal_venue_fill` WHERE `positionId` IN ("+
			store.Placeholders(len(ids))+") ORDER BY 1, 2", append(store.Int64Args(ids), store.Int64Args(ids)...)...)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range fills {
			pos[at[k.Position]].Booked = append(pos[at[k.Position]].Booked, k.Tx)
		}
	}
	where := "o.`execution` = 'EXTERNAL' AND o.`status` = 'SENDING'"
	args := []any{}
	if len(extraOrderIDs) > 0 {
		where = "(" + where + ") OR o.`id` IN (" + store.Placeholders(len(extraOrderIDs)) + ")"
		args = store.Int64Args(extraOrderIDs)
	}
	orders, err := store.QueryAll(ctx, tx, "external book: orders", func(sc store.Scanner) (VenueOrder, error) {
		var o VenueOrder
		var sent *time.Time
		var posID *int64
		var posStatus, trade *string
		var last *int64
		err := sc.Scan(&o.OrderID, &o.AccountID, &o.Symbol, &o.Side, &o.Volume, &o.Status, &sent, &posID, &posStatus, &trade, &last)
		if last != nil {
			o.LastVenueTx = *last
		}
		if sent != nil {
			o.SentAt = *sent
		}
		if posID != nil {
			o.PositionID = *posID
		}
		o.PositionOpen = posStatus != nil && *posStatus == fx.PositionOpen
		if trade != nil {
			o.TradeID = *trade
		}
		return o, err
	}, "SELECT o.`id`, o.`accountId`, o.`symbol`, o.`side`, o.`volume`, o.`status`, o.`sentAt`, p.`id`, p.`status`, p.`venueTradeId`, "+
		"(SELECT d.`venueTransactionId` FROM `fx_deal` d WHERE d.`positionId` = p.`id` AND d.`venueTransactionId` IS NOT NULL ORDER BY d.`venueTransactionId` DESC LIMIT 1) "+
		"FROM `fx_order` o LEFT JOIN `fx_position` p ON p.`orderId` = o.`id` WHERE "+where+" ORDER BY o.`id`", args...)
	if err != nil {
		return nil, nil, err
	}
	return pos, orders, nil
}

// ContractSizes maps every instrument to its contract size (venue units per lot).
func (b *ABook) ContractSizes(ctx context.Context) (map[string]decimal.Decimal, error) {
	s := b.s
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]decimal.Decimal, len(cat.Instruments))
	for sym, in := range cat.Instruments {
		out[sym] = in.ContractSize
	}
	return out, nil
}

// OpenExternalCount is how many EXTERNAL positions are open: the worst case of venue closes one
// gap can trigger at once (the executor is sized from it).
func (b *ABook) OpenExternalCount(ctx context.Context) (int, error) { return openExternal(ctx, b.s.db) }

func openExternal(ctx context.Context, q book.Querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_position` WHERE `status` = 'OPEN' AND `venueTradeId` IS NOT NULL").Scan(&n)
	return n, err
}

// SymbolExposure is the traders' net open lots on one symbol (buys positive), split by where
// they are hedged: INTERNAL positions are the desk's own risk (B-book, the desk holds the other
// side), EXTERNAL ones are mirrored at the venue (A-book).
type SymbolExposure struct {
	Symbol       string          `json:"symbol"`
	InternalLots decimal.Decimal `json:"internalLots"`
	ExternalLots decimal.Decimal `json:"externalLots"`
	ContractSize decimal.Decimal `json:"-"`
}

// Exposures sums every open position per symbol, INTERNAL and EXTERNAL apart. The sums are
// taken first, on idx_fx_position_symbol alone (its rows come in symbol order, so the grouping
// sorts nothing), and the few symbols joined to their instruments after: joined row by row, the
// instrument lookup of each of the year's 50,000 open positions took more than half of the
// statement (docs/operations.md, «The dealer's book»).
func (b *ABook) Exposures(ctx context.Context) ([]SymbolExposure, error) {
	s := b.s
	return store.QueryAll(ctx, s.db, "exposures", func(sc store.Scanner) (SymbolExposure, error) {
		var e SymbolExposure
		err := sc.Scan(&e.Symbol, &e.InternalLots, &e.ExternalLots, &e.ContractSize)
		return e, err
	}, "SELECT e.`symbol`, e.`internalLots`, e.`externalLots`, i.`contractSize` FROM ("+
		"SELECT p.`symbol`, "+
		"COALESCE(SUM(CASE WHEN p.`venueTradeId` IS NULL THEN IF(p.`side` = 'BUY', p.`volume`, -p.`volume`) ELSE 0 END), 0) AS `internalLots`, "+
		"COALESCE(SUM(CASE WHEN p.`venueTradeId` IS NOT NULL THEN IF(p.`side` = 'BUY', p.`volume`, -p.`volume`) ELSE 0 END), 0) AS `externalLots` "+
		"FROM `fx_position` p WHERE p.`status` = 'OPEN' GROUP BY p.`symbol`"+
		") e JOIN `fx_instrument` i ON i.`symbol` = e.`symbol` ORDER BY e.`symbol`")
}

// SendingOrder is an EXTERNAL order whose venue answer is not booked yet.
type SendingOrder struct {
	OrderID   int64           `json:"orderId"`
	AccountID int64           `json:"accountId"`
	Symbol    string          `json:"symbol"`
	Side      fx.Side         `json:"side"`
	Volume    decimal.Decimal `json:"volume"`
	SentAt    time.Time       `json:"sentAt"`
}

// SendingOrders lists the EXTERNAL orders in SENDING, oldest first (at most maxList).
func (b *ABook) SendingOrders(ctx context.Context) ([]SendingOrder, error) {
	s := b.s
	return store.QueryAll(ctx, s.db, "sending orders", func(sc store.Scanner) (SendingOrder, error) {
		var o SendingOrder
		err := sc.Scan(&o.OrderID, &o.AccountID, &o.Symbol, &o.Side, &o.Volume, &o.SentAt)
		return o, err
	}, "SELECT `id`, `accountId`, `symbol`, `side`, `volume`, `sentAt` FROM `fx_order` WHERE `execution` = 'EXTERNAL' AND `status` = 'SENDING' ORDER BY `id` LIMIT ?", maxList)
}
