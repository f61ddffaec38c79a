package invariant

import (
	"testing"
	"time"
)

// The rollover dates below are New York's 17:00 rollovers of March 2025 (before US daylight
// time: 22:00 UTC): 2025-03-03 is a Monday, 2025-03-06 a Thursday.

func swapFixture() *money {
	s := &Snapshot{
		Taken: at(3600),
		Deals: []dbDeal{
			{ID: 5, Account: 1, Type: "SWAP", Position: nid(10), Key: "swap:10:2025-03-05", Amount: dec("-3.33"), Volume: ndec("1"), Comment: "rollover x1", CreatedAt: at(10.5)},
			{ID: 6, Account: 1, Type: "SWAP", Position: nid(10), Key: "swap:10:2025-03-06", Amount: dec("-3.33"), Volume: ndec("1"), Comment: "rollover x1", CreatedAt: at(20.5)},
		},
		Positions: []dbPosition{
			// Opened on the 5th at 10:00 UTC: open at the rollovers of the 5th and the 6th.
			{ID: 10, Account: 1, Order: 100, Symbol: "EURJPY", Side: "BUY", OpenVolume: dec("1"), Volume: dec("1"), Status: "OPEN", OpenedAt: base.Add(-2 * time.Hour)},
		},
		Charges: []dbCharge{
			{Position: 10, Date: "2025-03-07", Status: "PENDING"},
			{Position: 10, Date: "2025-03-06", Status: "CHARGED"},
		},
		Instruments: map[string]dbInstrument{
			// A long lot of EURJPY pays 5 points a night: 100000 × 5 × 0.001 = 500 JPY, 3.33 USD
			// at a USDJPY mid of 150.
			"EURJPY": {Contract: dec("100000"), Point: dec("0.001"), SwapLong: dec("-5"), SwapShort: dec("1"), Quote: "JPY"},
			"EURUSD": {Contract: dec("100000"), Point: dec("0.00001"), SwapLong: dec("-1"), SwapShort: dec("1"), Quote: "USD"},
		},
	}
	// A run as of the evening of the 6th, while the position was open; the mirror held the live
	// holder's USDJPY when it started.
	ev := &Evidence{
		Runs: []RolloverRun{{At: time.Date(2025, 3, 6, 23, 0, 0, 0, time.UTC), Start: at(10), End: at(11), OK: true, Why: "concurrent pair"}},
		Rows: []RowSample{{At: at(0), OK: true, Row: LeaseRow{PID: 100, Term: 1, Live: true}}},
		Mirrors: []MirrorSample{
			{At: at(9), Present: true, Term: 1, PublishedAt: at(8.9).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}},
		},
	}
	return &money{s, ev}
}

func TestSwapOnceCheckFlagsASecondChargeForOneRolloverDate(t *testing.T) {
	runCases(t, swapFixture, func(m *money) Result { return checkSwapUnique(m.s) }, []checkCase[*money]{
		{"two swap deals for one date", func(m *money) {
			m.s.Deals = append(m.s.Deals, dbDeal{ID: 7, Type: "SWAP", Position: nid(10), Key: "swap:10:2025-03-05"})
		}, "position 10 date 2025-03-05: swap deals [5 7]"},
		{"a swap deal keyed for another position", func(m *money) { m.s.Deals[0].Position = nid(11) },
			"deal 5 key swap:10:2025-03-05 on position 11"},
		{"a pending charge beside a deal of its date", func(m *money) { m.s.Charges[1].Status = "PENDING" },
			"position 10 date 2025-03-06: pending charge beside swap deal [6]"},
	})
}

func TestRolloversDueCheckFlagsADateACompletedRunLeftUnchargedOrAGapBeforeACharge(t *testing.T) {
	runCases(t, swapFixture, func(m *money) Result { return checkRolloversDue(m.s, m.ev) }, []checkCase[*money]{
		{"a completed run left a due date uncharged", func(m *money) { m.s.Deals = m.s.Deals[:1]; m.s.Charges = m.s.Charges[:1] },
			"position 10 (EURJPY BUY 1 lots opened 2025-03-05T10:00:00Z, now OPEN) has no charge for 2025-03-06 although run 1"},
		{"a pending charge row stands for the date", func(m *money) { m.s.Deals = m.s.Deals[:1] }, ""},
		{"the run was killed", func(m *money) {
			m.s.Deals, m.s.Charges = nil, nil
			m.ev.Runs[0].OK = false
		}, ""},
		{"the run ended after the snapshot", func(m *money) {
			m.s.Deals, m.s.Charges = nil, nil
			m.s.Taken = at(10.5)
		}, ""},
		{"the position was written after the run (adopted, opened at the venue's earlier time)", func(m *money) {
			m.s.Deals, m.s.Charges = nil, nil
			m.s.Events = []dbEvent{{ID: 1, Type: "position.opened", Payload: `{"id":10}`, CreatedAt: at(11.5)}}
		}, ""},
		{"the position was written before the run", func(m *money) {
			m.s.Deals, m.s.Charges = m.s.Deals[:1], m.s.Charges[:1]
			m.s.Events = []dbEvent{{ID: 1, Type: "position.opened", Payload: `{"id":10}`, CreatedAt: at(5)}}
		}, "has no charge for 2025-03-06 although run 1"},
		{"the position closed during the run", func(m *money) {
			m.s.Deals, m.s.Charges = nil, nil
			m.s.Positions[0].ClosedAt = ntime(at(10.5))
		}, ""},
		{"a date skipped before a charged one", func(m *money) {
			m.ev.Runs = nil
			m.s.Positions[0].OpenedAt = time.Date(2025, 3, 3, 12, 0, 0, 0, time.UTC)
		}, "was charged for 2025-03-07 but never for 2025-03-03"},
	})
}

func TestSwapPriceCheckFlagsAConversionAtAPriceTheLiveHolderNeverQuoted(t *testing.T) {
	runCases(t, swapFixture, func(m *money) Result { return checkSwapConversion(m.s, m.ev) }, []checkCase[*money]{
		{"converted at a mid the mirror never held", func(m *money) { m.ev.Mirrors[0].Mids["USDJPY"] = 140 },
			"deal 5 (position 10 EURJPY BUY 1, 2025-03-05, amount -3.33) converted at USDJPY 149.910–150.391; live holder's mids then: 140.000"},
		{"the mid came from a replaced holder", func(m *money) {
			m.ev.Rows = append(m.ev.Rows, RowSample{At: at(8), OK: true, Row: LeaseRow{PID: 200, Term: 2, Live: true}})
		}, "live holder's mids then: none; other terms' mids: 150.000(term 1"},
		{"the mid came from a holder granted by Redis alone (term 0)", func(m *money) {
			m.ev.Mirrors[0].Term = 0
		}, ""},
		{"the mid came from a term-0 holder the row had replaced", func(m *money) {
			m.ev.Mirrors[0].Term = 0
			// Its run of term-0 snapshots began before the row moved to term 2.
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(7), Present: true, PublishedAt: at(6.9).Format(time.RFC3339Nano)})
			m.ev.Rows = append(m.ev.Rows, RowSample{At: at(8), OK: true, Row: LeaseRow{PID: 200, Term: 2, Live: true}})
		}, "live holder's mids then: none; other terms' mids: 150.000(term 0"},
		{"no mirror sample near the run", func(m *money) { m.ev.Mirrors[0].At = at(2) }, ""},
		{"a deal written outside every run", func(m *money) { m.ev.Mirrors[0].Mids["USDJPY"] = 140; m.s.Deals[0].CreatedAt = at(30) }, ""},
		{"a USD-quoted position", func(m *money) { m.ev.Mirrors[0].Mids["USDJPY"] = 140; m.s.Positions[0].Symbol = "EURUSD" }, ""},
		{"the process reached its job 1.7 s after it started, and read the mirror then", func(m *money) {
			m.ev.Mirrors[0].Mids["USDJPY"] = 140
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(11.4), Present: true, Term: 1, PublishedAt: at(11.3).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
			m.ev.Runs[0].End = at(11.8)
			m.ev.Runs[0].Output = `{"time":"` + at(11.78).Format(time.RFC3339Nano) + `","level":"INFO","msg":"job ran","job":"processFxSwaps","took":70000000,"charged":1}` + "\nprocessFxSwaps as of …\n"
		}, ""},
		{"a mid published after the job started", func(m *money) {
			m.ev.Mirrors[0].Mids["USDJPY"] = 140
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(12.9), Present: true, Term: 1, PublishedAt: at(12.8).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
			m.ev.Runs[0].End = at(11.8)
			m.ev.Runs[0].Output = `{"time":"` + at(11.78).Format(time.RFC3339Nano) + `","level":"INFO","msg":"job ran","job":"processFxSwaps","took":70000000,"charged":1}`
		}, "live holder's mids then: 140.000"},
		// Seed 237868095786120: a run killed before its job line took 3 s to reach its job and
		// read the live holder's mirror then; its deals, written after that read, bound it.
		{"a killed run read the mirror after its start, before it wrote the deal", func(m *money) {
			killedRun(m)
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(12.6), Present: true, Term: 1, PublishedAt: at(12.5).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
		}, ""},
		{"a killed run's deal at a mid published only after the deal", func(m *money) {
			killedRun(m)
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(14.3), Present: true, Term: 1, PublishedAt: at(14.2).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
		}, "live holder's mids then: 140.000"},
	})
}

// killedRun makes the fixture's run one killed before its job ended (no "job" line in its
// output) whose deal 5 was written 3 s after it started; the mirror held 140 at its start.
func killedRun(m *money) {
	m.ev.Mirrors[0].Mids["USDJPY"] = 140
	m.ev.Runs[0] = RolloverRun{At: m.ev.Runs[0].At, Start: at(10), End: at(13.5), Killed: true, Why: "kill"}
	m.s.Deals[0].CreatedAt = at(13)
}
