package invariant

import (
	"strconv"
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
		// The deal names no run: the pair's first run, slow to reach its job on a loaded machine,
		// read 150 two seconds after the other had read 140, and wrote the deal. The check once
		// judged it by the last run going alone, and flagged it.
		{"a concurrent pair's slower run wrote the deal at the mid it read", func(m *money) {
			pairRuns(m)
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(12.4), Present: true, Term: 1, PublishedAt: at(12.3).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
		}, ""},
		{"a concurrent pair's deal at a mid neither run read", func(m *money) {
			pairRuns(m)
			m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(14.5), Present: true, Term: 1, PublishedAt: at(14.4).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
		}, "live holder's mids then: 140.000"},
		// fxdesk-cron's hourly run, begun at the top of the hour, charged a charge a run had parked
		// at its follower's mid of then; a one-off run was going when it wrote the deal.
		{"fxdesk-cron's hourly run wrote the deal at its follower's mid", func(m *money) {
			hourlyRun(m)
		}, ""},
		{"without the hourly run, its deal is the one-off run's and off", func(m *money) {
			hourlyRun(m)
			m.ev.ScheduledSwaps = nil
		}, "live holder's mids then: 140.000"},
	})
}

// pairRuns makes the fixture's run a concurrent pair: both started at 10 s; the first reached
// its job (read the mirror) at 12.3 s, the second — recorded last — at 10.05 s, when the mirror
// held 140; deal 5 was written at 13 s.
func pairRuns(m *money) {
	m.ev.Mirrors[0].Mids["USDJPY"] = 140
	job := func(end, took float64) string {
		return `{"time":"` + at(end).Format(time.RFC3339Nano) + `","level":"INFO","msg":"job ran","job":"processFxSwaps","took":` +
			strconv.FormatInt(int64(took*1e9), 10) + `,"charged":1}`
	}
	m.ev.Runs = []RolloverRun{
		{At: m.ev.Runs[0].At, Start: at(10), End: at(14), OK: true, Why: "concurrent pair", Output: job(13.9, 1.6)},
		{At: m.ev.Runs[0].At, Start: at(10), End: at(14), OK: true, Why: "concurrent pair", Output: job(13.95, 3.9)},
	}
	m.s.Deals[0].CreatedAt = at(13)
}

// hourlyRun adds fxdesk-cron's scheduled run from 6 s to 10.8 s, whose follower held 150 when it
// began; the mirror held 140 from 9 s, through the one-off run (10–11 s) while deal 5 was written
// at 10.5 s.
func hourlyRun(m *money) {
	m.ev.Mirrors[0].Mids["USDJPY"] = 140
	m.ev.Mirrors = append(m.ev.Mirrors, MirrorSample{At: at(5.2), Present: true, Term: 1, PublishedAt: at(5.1).Format(time.RFC3339Nano), Mids: map[string]float64{"USDJPY": 150}})
	m.ev.ScheduledSwaps = []RolloverRun{{At: at(6), Start: at(6), End: at(10.8), OK: true, Why: "scheduled"}}
}

// ScheduledSwapRuns reads fxdesk-cron's hourly processFxSwaps runs from its log, and counts a top
// of the hour with no line yet as a run still going.
func TestScheduledSwapRunsReadsTheCronLog(t *testing.T) {
	t.Parallel()
	log := `{"time":"2026-12-07T08:59:16.6Z","level":"INFO","msg":"fxdesk-cron starting"}
{"time":"2026-12-07T09:00:00.138Z","level":"INFO","msg":"job ran","job":"summariseFxPnl","at":"2026-12-07T09:00:00.001Z","took":136544903}
{"time":"2026-12-07T09:00:15.1Z","level":"INFO","msg":"job ran","job":"processFxSwaps","at":"2026-12-07T09:00:00.001Z","took":15107813283,"retried":3}
not a line
{"time":"2026-12-07T10:00:02Z","level":"INFO","msg":"job ran","job":"reconcileFxAccounts","at":"2026-12-07T10:00:00.002Z","took":2000000000}
`
	now := time.Date(2026, 12, 7, 10, 0, 30, 0, time.UTC)
	runs := ScheduledSwapRuns(log, now)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2: %+v", len(runs), runs)
	}
	if r := runs[0]; !r.OK || r.Start != time.Date(2026, 12, 7, 9, 0, 0, 1000000, time.UTC) || r.End != time.Date(2026, 12, 7, 9, 0, 15, 100000000, time.UTC) {
		t.Errorf("the 09:00 run: %+v", r)
	}
	if r := runs[1]; r.OK || r.Start != time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC) || r.End != now {
		t.Errorf("the 10:00 run, still going: %+v", r)
	}
}

// killedRun makes the fixture's run one killed before its job ended (no "job" line in its
// output) whose deal 5 was written 3 s after it started; the mirror held 140 at its start.
func killedRun(m *money) {
	m.ev.Mirrors[0].Mids["USDJPY"] = 140
	m.ev.Runs[0] = RolloverRun{At: m.ev.Runs[0].At, Start: at(10), End: at(13.5), Killed: true, Why: "kill"}
	m.s.Deals[0].CreatedAt = at(13)
}
