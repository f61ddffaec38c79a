package invariant

import (
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/eod"
)

// The end of day of two frozen days, 2025-03-05 and -06 (rollovers at 22:00 UTC), each frozen by
// its own on-time run well before its rollover, as the soak's runs freeze days ahead of the
// clock. Account 1 (default group) holds half a lot of EURUSD long and a tenth of USDJPY short;
// account 2 (soak-a, overridden) holds nothing.

func eodFixture() *money {
	d1 := time.Date(2025, 3, 5, 22, 0, 0, 0, time.UTC)
	s := &Snapshot{
		Taken: at(200),
		Accounts: []dbAccount{
			{ID: 1, User: 1001, Group: "default", Currency: "USD", Balance: dec("10022.00"), CreatedAt: at(0)},
			{ID: 2, User: 1002, Group: "soak-a", Currency: "USD", Balance: dec("500.00"), CreatedAt: at(0)},
		},
		Deals: []dbDeal{
			{ID: 1, Account: 1, Type: "DEPOSIT", Amount: dec("10000.00"), BalanceAfter: dec("10000.00"), Key: "dep:1"},
			{ID: 3, Account: 1, Type: "PROFIT", Amount: dec("25.00"), BalanceAfter: dec("10025.00"), Position: nid(10), Volume: ndec("0.5"), Key: "close:10:1"},
			{ID: 5, Account: 1, Type: "SWAP", Amount: dec("-3.00"), BalanceAfter: dec("10022.00"), Position: nid(10), Key: "swap:10:2025-03-06"},
			{ID: 2, Account: 2, Type: "DEPOSIT", Amount: dec("500.00"), BalanceAfter: dec("500.00"), Key: "dep:2"},
			{ID: 4, Account: 2, Type: "DEPOSIT", Amount: dec("0.00"), BalanceAfter: dec("500.00"), Key: "dep:4"},
		},
		Positions: []dbPosition{
			{ID: 10, Account: 1, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("1"), Volume: dec("0.5"), OpenPrice: dec("1.10000"), Status: "OPEN", OpenedAt: at(10)},
			{ID: 11, Account: 1, Symbol: "USDJPY", Side: "SELL", OpenVolume: dec("0.1"), Volume: dec("0.1"), OpenPrice: dec("150.000"), Status: "OPEN", OpenedAt: at(11)},
		},
		Instruments: map[string]dbInstrument{
			// EURUSD's symbol group marks up 10 points; USDJPY's none.
			"EURUSD": {Contract: dec("100000"), Point: dec("0.00001"), Markup: dec("10"), Base: "EUR", Quote: "USD"},
			"USDJPY": {Contract: dec("100000"), Point: dec("0.001"), Markup: dec("0"), Base: "USD", Quote: "JPY"},
		},
		Overridden: map[string]bool{"soak-a": true},
		EOD: EOD{
			Days: []dbEODDay{
				{Day: "2025-03-05", RolloverAt: d1, Mode: "ON_TIME", Accounts: 2, FrozenAt: at(61), FrozenBy: "host:101"},
				{Day: "2025-03-06", RolloverAt: d1.Add(24 * time.Hour), Mode: "ON_TIME", Accounts: 2, FrozenAt: at(121), FrozenBy: "host:102"},
			},
			// Account 1 on the 5th: EURUSD closes at bid − 10 points, 1.10190: (1.1019 × 0.5 −
			// 0.55) × 100000 = 95.00 USD; USDJPY short closes at the ask, 150.120: −(15.012 − 15)
			// × 100000 = −1200 JPY, at the USDJPY mid 150.11 −7.99 USD. Floating 87.01.
			Accounts: []dbEODAccount{
				{Day: "2025-03-05", Account: 1, Currency: "USD", Balance: dec("10025.00"), Equity: ndec("10112.01"), Margin: ndec("1000.00"),
					FreeMargin: ndec("9112.01"), Floating: ndec("87.01"), OpenPositions: 2, Through: 3, TakenAt: at(60)},
				{Day: "2025-03-05", Account: 2, Currency: "USD", Balance: dec("500.00"), Equity: ndec("500.00"), Margin: ndec("0"),
					FreeMargin: ndec("500.00"), Floating: ndec("0"), Through: 2, TakenAt: at(60)},
				{Day: "2025-03-06", Account: 1, Currency: "USD", Balance: dec("10022.00"), Equity: ndec("10109.01"), Margin: ndec("1000.00"),
					FreeMargin: ndec("9109.01"), Floating: ndec("87.01"), OpenPositions: 2, Through: 5, TakenAt: at(120)},
				{Day: "2025-03-06", Account: 2, Currency: "USD", Balance: dec("500.00"), Equity: ndec("500.00"), Margin: ndec("0"),
					FreeMargin: ndec("500.00"), Floating: ndec("0"), Through: 4, TakenAt: at(120)},
			},
			Symbols: []dbEODSymbol{
				{Day: "2025-03-05", Symbol: "EURUSD", Currency: "USD", Figures: "0.5 | 0 | 0 | 25 | 0 | 0 | 0 | 0 | 0", TakenAt: at(60.5)},
			},
			Prices: []dbEODPrice{
				{Day: "2025-03-05", Symbol: "EURUSD", Bid: dec("1.10200"), Ask: dec("1.10210"), QuotedAt: at(55), CapturedAt: at(56), CapturedBy: "host:101"},
				{Day: "2025-03-05", Symbol: "USDJPY", Bid: dec("150.100"), Ask: dec("150.120"), QuotedAt: at(55), CapturedAt: at(56), CapturedBy: "host:101"},
				{Day: "2025-03-06", Symbol: "EURUSD", Bid: dec("1.10200"), Ask: dec("1.10210"), QuotedAt: at(115), CapturedAt: at(116), CapturedBy: "host:102"},
				{Day: "2025-03-06", Symbol: "USDJPY", Bid: dec("150.100"), Ask: dec("150.120"), QuotedAt: at(115), CapturedAt: at(116), CapturedBy: "host:102"},
			},
		},
	}
	ev := &Evidence{
		Runs: []RolloverRun{
			{At: d1.Add(5 * time.Minute), PID: 101, Start: at(55), End: at(62), OK: true, Why: "concurrent pair"},
			{At: d1.Add(24*time.Hour + 5*time.Minute), PID: 102, Start: at(115), End: at(122), OK: true, Why: "rerun after a kill"},
		},
		EODSeen: map[string]EODRow{},
	}
	// What the soak read after each run: the rows as they are.
	for _, row := range s.EOD.Rows(at(123)) {
		ev.EODSeen[row.ID()] = row
	}
	return &money{s, ev}
}

func TestEODCompleteCheckFlagsAMissingSnapshotOrADueDayLeftUnfrozen(t *testing.T) {
	runCases(t, eodFixture, func(m *money) Result { return checkEODComplete(m.s, m.ev) }, []checkCase[*money]{
		{"a snapshot row deleted", func(m *money) { m.s.EOD.Accounts = m.s.EOD.Accounts[:3] },
			"day 2025-03-06 (ON_TIME, frozen 12:02:01.000 by host:102): 1 account snapshots, but its fx_eod_day row counted 2"},
		{"an account that existed at the freeze left out, and the day's count agrees", func(m *money) {
			m.s.EOD.Accounts = m.s.EOD.Accounts[:3]
			m.s.EOD.Days[1].Accounts = 1
		}, "no snapshot of account 2, opened 2025-03-05T12:00:00Z, before the freeze"},
		{"an account opened after the freeze has none", func(m *money) {
			m.s.Accounts = append(m.s.Accounts, dbAccount{ID: 3, Currency: "USD", CreatedAt: at(150)})
		}, ""},
		{"an account opened within a second of the first row may be missing", func(m *money) {
			m.s.Accounts = append(m.s.Accounts, dbAccount{ID: 3, Currency: "USD", CreatedAt: at(119.5)})
		}, ""},
		{"a snapshot of an account that does not exist", func(m *money) {
			m.s.EOD.Accounts = append(m.s.EOD.Accounts, dbEODAccount{Day: "2025-03-06", Account: 9, Currency: "USD", TakenAt: at(120)})
			m.s.EOD.Days[1].Accounts = 3
		}, "a snapshot of account 9, which does not exist"},
		{"a snapshot in another currency", func(m *money) { m.s.EOD.Accounts[1].Currency = "EUR" },
			"account 2's snapshot is in EUR, the account in USD"},
		{"a day rebuilt as of its rollover holds an account opened after it", func(m *money) {
			m.s.EOD.Days[0].Mode = "CAUGHT_UP"
			m.s.Accounts[1].CreatedAt = m.s.EOD.Days[0].RolloverAt.Add(time.Minute)
		}, "a snapshot of account 2, opened 2025-03-05T22:01:00Z, after the rollover"},
		{"a completed run left its own priced day unfrozen", func(m *money) {
			m.s.EOD.Days = m.s.EOD.Days[:1]
			m.s.EOD.Accounts = m.s.EOD.Accounts[:2]
		}, "day 2025-03-06, its prices captured 12:01:56.000, is not frozen, though run 2 (rerun after a kill"},
		{"the run that captured the day's prices was killed before it froze it", func(m *money) {
			m.s.EOD.Days = m.s.EOD.Days[:1]
			m.s.EOD.Accounts = m.s.EOD.Accounts[:2]
			m.ev.Runs[1].OK = false
		}, ""},
		{"a day frozen only after the completed run that owed it", func(m *money) { m.s.EOD.Days[1].FrozenAt = at(130) },
			"frozen only after run 2"},
		{"a day captured by a concurrent run while this one read none, frozen after it", func(m *money) {
			m.s.EOD.Prices[2].CapturedBy, m.s.EOD.Prices[3].CapturedBy = "host:103", "host:103"
			m.s.EOD.Days[1].FrozenAt, m.s.EOD.Days[1].FrozenBy = at(130), "host:103"
		}, ""},
		{"a day captured by a killed run and caught up by the next rollover's run", func(m *money) {
			m.ev.Runs[0].OK = false
			m.s.EOD.Days[0].FrozenAt, m.s.EOD.Days[0].FrozenBy = at(120.5), "host:102"
		}, ""},
		{"a day the next rollover's run had due, priced before it began, left unfrozen", func(m *money) {
			m.ev.Runs[0].OK = false
			m.s.EOD.Days = m.s.EOD.Days[1:]
			m.s.EOD.Accounts = m.s.EOD.Accounts[2:]
		}, "day 2025-03-05, its prices captured 12:00:56.000, is not frozen, though run 2"},
	})
}

func TestEODReconcilesCheckFlagsABalanceThatDoesNotFollowFromTheDaysDeals(t *testing.T) {
	runCases(t, eodFixture, func(m *money) Result { return checkEODReconciles(m.s, m.ev) }, []checkCase[*money]{
		{"a frozen balance updated", func(m *money) { m.s.EOD.Accounts[0].Balance = dec("10030.00") },
			"day 2025-03-05 account 1: previous close 0 (none) + 2 deals in (0, 3] 10025 = 10025, but the frozen balance is 10030"},
		{"the next day's balance follows the rewritten one", func(m *money) { m.s.EOD.Accounts[0].Balance = dec("10030.00") },
			"day 2025-03-06 account 1: previous close 10030 (2025-03-05) + 1 deals in (3, 5] -3 = 10027, but the frozen balance is 10022"},
		{"a balance frozen through another account's deal", func(m *money) { m.s.EOD.Accounts[2].Through = 4 },
			"day 2025-03-06 account 1: frozen through deal 4, which is not the account's"},
		{"a deal of the day changed afterwards", func(m *money) { m.s.Deals[2].Amount = dec("-4.00") },
			"+ 1 deals in (3, 5] -4 = 10021, but the frozen balance is 10022"},
		{"frozen through an earlier deal than the day before", func(m *money) {
			m.s.EOD.Accounts[2].Through, m.s.EOD.Accounts[2].Balance = 1, dec("10000.00")
		}, "frozen through deal 1, before the previous frozen day's (2025-03-05: deal 3)"},
		{"eod.Reconcile found a mismatch", func(m *money) {
			m.ev.Reconciled = []eod.Mismatch{{TradingDay: "2025-03-06", AccountID: 1, Currency: "USD", Previous: "10025.00", Deals: "-3.00", Balance: "10021.00", Difference: "-1.00"}}
		}, "eod.Reconcile: account 1 on 2025-03-06: previous close 10025.00 + the day's deals -3.00 ≠ frozen balance 10021.00 USD"},
		{"eod.Reconcile could not run", func(m *money) { m.ev.ReconcileErr = "connection refused" }, "eod.Reconcile could not check the frozen days: connection refused"},
		{"the desk raised its reconciliation alert", func(m *money) {
			m.s.Alerts = []dbAlert{{Code: eod.AlertReconciliation, Status: "OPEN", Message: "End of day does not reconcile", FirstSeen: at(121)}}
		}, "eod-reconciliation-failed raised 12:02:01.000 (OPEN)"},
		{"a prices-missing alert is not a reconciliation", func(m *money) {
			m.s.Alerts = []dbAlert{{Code: eod.AlertPricesMissing, Status: "OPEN", FirstSeen: at(121)}}
		}, ""},
		{"an incomplete day's rows are not judged", func(m *money) {
			m.s.EOD.Accounts = append(m.s.EOD.Accounts, dbEODAccount{Day: "2025-03-07", Account: 1, Currency: "USD", Balance: dec("1"), Through: 5, TakenAt: at(180)})
		}, ""},
	})
}

func TestEODUnchangedCheckFlagsARowRewrittenOrRemovedAfterItWasRead(t *testing.T) {
	runCases(t, eodFixture, func(m *money) Result { return checkEODUnchanged(m.s, m.ev) }, []checkCase[*money]{
		{"a frozen balance rewritten", func(m *money) { m.s.EOD.Accounts[0].Balance = dec("10030.00") },
			"fx_eod_account 2025-03-05 account 1 was rewritten: [USD | 10025 | 10112.01"},
		{"a snapshot row removed", func(m *money) { m.s.EOD.Accounts = m.s.EOD.Accounts[1:] },
			"fx_eod_account 2025-03-05 account 1, read at 12:02:03.000 as [USD | 10025"},
		{"a closing price rewritten", func(m *money) { m.s.EOD.Prices[0].Bid = dec("1.10300") },
			"fx_eod_price 2025-03-05 EURUSD was rewritten: [1.102 | 1.1021"},
		{"a desk row rewritten", func(m *money) { m.s.EOD.Symbols[0].Figures = "0.5 | 0 | 0 | 26 | 0 | 0 | 0 | 0 | 0" },
			"fx_eod_symbol 2025-03-05 EURUSD USD was rewritten"},
		{"a day row rewritten", func(m *money) { m.s.EOD.Days[0].Mode = "CAUGHT_UP" }, "fx_eod_day 2025-03-05 was rewritten"},
		{"the same value at another scale", func(m *money) { m.s.EOD.Accounts[0].Balance = dec("10025.000") }, ""},
		{"a row read after the snapshot began, gone from it", func(m *money) {
			m.ev.EODSeen["fx_eod_price 2025-03-07 EURUSD"] = EODRow{Table: "fx_eod_price", Key: "2025-03-07 EURUSD", Values: "1.1", Seen: at(201)}
		}, ""},
		{"a row read before the snapshot began, gone from it", func(m *money) {
			m.ev.EODSeen["fx_eod_price 2025-03-07 EURUSD"] = EODRow{Table: "fx_eod_price", Key: "2025-03-07 EURUSD", Values: "1.1", Seen: at(199)}
		}, "fx_eod_price 2025-03-07 EURUSD, read at 12:03:19.000 as [1.1], is gone"},
		{"a row written after the last read", func(m *money) {
			m.s.EOD.Prices = append(m.s.EOD.Prices, dbEODPrice{Day: "2025-03-07", Symbol: "EURUSD", CapturedAt: at(190)})
		}, ""},
		{"a price added to a day after it was frozen", func(m *money) {
			m.s.EOD.Prices = append(m.s.EOD.Prices, dbEODPrice{Day: "2025-03-05", Symbol: "GBPUSD", Bid: dec("1.3"), Ask: dec("1.3001"), CapturedAt: at(70), CapturedBy: "host:103"})
		}, "fx_eod_price 2025-03-05 GBPUSD (bid 1.3, ask 1.3001) captured 12:01:10.000 by host:103, after day 2025-03-05"},
	})
}

func TestEODMarksCheckFlagsMarksThatAreNotTheDaysPricesOnThePositionsOpenAtTheFreeze(t *testing.T) {
	runCases(t, eodFixture, func(m *money) Result { return checkEODMarks(m.s) }, []checkCase[*money]{
		{"a floating P&L off by a cent", func(m *money) {
			m.s.EOD.Accounts[0].Floating, m.s.EOD.Accounts[0].Equity, m.s.EOD.Accounts[0].FreeMargin = ndec("87.02"), ndec("10112.02"), ndec("9112.02")
		}, "day 2025-03-05 account 1: floating P&L 87.02 frozen, but its 2 open positions at the day's prices make 87.01"},
		{"marked at another price than the day's", func(m *money) { m.s.EOD.Prices[0].Bid = dec("1.10300") },
			"day 2025-03-05 account 1: floating P&L 87.01 frozen, but its 2 open positions at the day's prices make 137.01"},
		{"converted at another USDJPY mid than the day's", func(m *money) { m.s.EOD.Prices[3].Ask = dec("150.500") },
			"day 2025-03-06 account 1: floating P&L 87.01 frozen, but its 2 open positions at the day's prices make 61.73"},
		{"equity is not balance + floating", func(m *money) { m.s.EOD.Accounts[2].Equity = ndec("10112.01") },
			"day 2025-03-06 account 1: equity 10112.01, but balance 10022 + floating 87.01 = 10109.01"},
		{"free margin is not equity − margin", func(m *money) { m.s.EOD.Accounts[2].FreeMargin = ndec("9000.00") },
			"free margin 9000, but equity 10109.01 − margin 1000 = 9109.01"},
		{"marks NULL though every price was captured", func(m *money) {
			a := &m.s.EOD.Accounts[0]
			a.Equity.Valid, a.Margin.Valid, a.FreeMargin.Valid, a.Floating.Valid = false, false, false, false
		}, "day 2025-03-05 account 1: marks NULL (floating NULL, equity NULL, margin NULL) although every price its 2 positions need was captured"},
		{"marked though the day has no USDJPY", func(m *money) { m.s.EOD.Prices = slicesDelete(m.s.EOD.Prices, 1) },
			"day 2025-03-05 account 1: marked (floating 87.01) although the day has no closing price of USDJPY"},
		{"NULL marks where the day has no USDJPY", func(m *money) {
			m.s.EOD.Prices = slicesDelete(m.s.EOD.Prices, 1)
			a := &m.s.EOD.Accounts[0]
			a.Equity.Valid, a.Margin.Valid, a.FreeMargin.Valid, a.Floating.Valid = false, false, false, false
		}, ""},
		{"a position counted that was closed before the freeze", func(m *money) { m.s.EOD.Accounts[0].OpenPositions = 3 },
			"day 2025-03-05 account 1: 3 open positions frozen, but its positions and the deals it includes (through 3) leave 2 open"},
		{"a close after the freeze leaves the frozen marks as they were", func(m *money) {
			m.s.Deals = append(m.s.Deals, dbDeal{ID: 6, Account: 1, Type: "PROFIT", Amount: dec("1"), Position: nid(10), Volume: ndec("0.5"), Key: "close:10:0.5"})
			m.s.Positions[0].Volume, m.s.Positions[0].Status = dec("0"), "CLOSED"
		}, ""},
		{"a close the snapshot includes takes its volume off", func(m *money) { m.s.Deals[1].Volume = ndec("0.4") },
			"day 2025-03-05 account 1: floating P&L 87.01 frozen, but its 2 open positions at the day's prices make 106.01"},
		{"a position written after the freeze is not in it", func(m *money) {
			m.s.Positions = append(m.s.Positions, dbPosition{ID: 12, Account: 1, Symbol: "EURUSD", Side: "SELL", OpenVolume: dec("1"), OpenPrice: dec("1.2"), OpenedAt: at(130)})
		}, ""},
		{"a position written just before a freeze is not judged", func(m *money) {
			m.s.Positions = append(m.s.Positions, dbPosition{ID: 12, Account: 1, Symbol: "EURUSD", Side: "SELL", OpenVolume: dec("1"), OpenPrice: dec("1.2"), OpenedAt: at(115)})
			m.s.EOD.Accounts[2].Floating = ndec("1")
		}, ""},
		{"an account moved into its group before the freeze is judged", func(m *money) {
			m.s.Audits = []dbAudit{move(1, at(5), "soak-a", "default")}
			m.s.EOD.Accounts[0].Floating = ndec("1")
		}, "day 2025-03-05 account 1: floating P&L 1 frozen"},
		{"an account moved just before a freeze is not judged on that day", func(m *money) {
			m.s.Audits = []dbAudit{move(1, at(55), "soak-a", "default")}
			m.s.EOD.Accounts[0].Floating = ndec("1")
		}, ""},
		{"an account moved out of an overridden group after a freeze is not judged on that day", func(m *money) {
			m.s.Audits = []dbAudit{move(1, at(90), "soak-a", "default")}
			m.s.EOD.Accounts[0].Floating = ndec("1")
		}, ""},
		{"an account moved out of an overridden group is judged on the days after", func(m *money) {
			m.s.Audits = []dbAudit{move(1, at(90), "soak-a", "default")}
			m.s.EOD.Accounts[2].Floating = ndec("1")
		}, "day 2025-03-06 account 1: floating P&L 1 frozen"},
		{"an account whose group was overridden is not judged", func(m *money) {
			m.s.Audits = []dbAudit{{Action: "symbol_override.set", EntityType: "symbol_override", EntityID: "default/EURUSD"}}
			m.s.EOD.Accounts[0].Floating = ndec("1")
		}, ""},
	})
}

// slicesDelete is ps without its i-th price.
func slicesDelete(ps []dbEODPrice, i int) []dbEODPrice {
	return append(append([]dbEODPrice(nil), ps[:i]...), ps[i+1:]...)
}

// move is the audit row of account id's move at t from one group to another.
func move(id int64, t time.Time, from, to string) dbAudit {
	return dbAudit{At: t, Action: "account.move", EntityType: "account", EntityID: strconv.FormatInt(id, 10),
		Before: nstr(`{"group":"` + from + `"}`), After: nstr(`{"group":"` + to + `"}`)}
}
