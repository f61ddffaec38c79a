package fixvenue

import "testing"

// An immediate LIMIT executes at the venue's price when that is at its limit or better, and is
// cancelled whole, nothing executed and the net unchanged, when the price is beyond it — for a
// buy above the limit, for a sell below it. Bid 1.1000, ask 1.1002.
func TestLimitOrderExecutesOnlyWithinItsLimit(t *testing.T) {
	for _, c := range []struct {
		name, side, limit string
		filled            bool
	}{
		{"a buy limited above the ask", sideBuy, "1.1005", true},
		{"a buy limited at the ask", sideBuy, "1.1002", true},
		{"a buy limited below the ask", sideBuy, "1.1001", false},
		{"a sell limited below the bid", sideSell, "1.0995", true},
		{"a sell limited at the bid", sideSell, "1.1000", true},
		{"a sell limited above the bid", sideSell, "1.1001", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Config{Prices: fixedQuote{"1.1000", "1.1002"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			limit := dec(c.limit)
			s.book.orderAt("1", "EURUSD", c.side, dec("10000"), "4", &limit, 1, false)
			o, _ := s.book.status("1")
			units, _ := s.book.net("EURUSD")
			if c.filled && (o.Status != statusFilled || !o.CumQty.Equal(dec("10000")) || units.IsZero()) {
				t.Fatalf("order %+v, net %s: want filled whole", o, units)
			}
			if !c.filled && (o.Status != statusCanceled || !o.CumQty.IsZero() || !units.IsZero() || o.OrdType != ordLimit) {
				t.Fatalf("order %+v, net %s: want cancelled whole, nothing executed", o, units)
			}
		})
	}
}

// A partial fault on an immediate LIMIT within its limit fills the part of an IOC (the rest
// cancelled) and cancels a FOK whole.
func TestLimitOrderUnderPartialFault(t *testing.T) {
	s, err := New(Config{Prices: fixedQuote{"1.1000", "1.1002"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	part := dec("6000")
	if err := s.InjectFault(Fault{Kind: FaultPartial, Units: &part, Count: 2}); err != nil {
		t.Fatal(err)
	}
	limit := dec("1.1003")
	s.book.orderAt("ioc", "EURUSD", sideBuy, dec("10000"), "3", &limit, 1, false)
	s.book.orderAt("fok", "EURUSD", sideBuy, dec("10000"), "4", &limit, 2, false)
	if o, _ := s.book.status("ioc"); o.Status != statusCanceled || !o.CumQty.Equal(part) {
		t.Fatalf("IOC %+v: want 6000 filled, the rest cancelled", o)
	}
	if o, _ := s.book.status("fok"); o.Status != statusCanceled || !o.CumQty.IsZero() {
		t.Fatalf("FOK %+v: want cancelled whole", o)
	}
	if units, _ := s.book.net("EURUSD"); !units.Equal(part) {
		t.Fatalf("net %s, want the IOC's 6000 alone", units)
	}
}

// With a PartStep a partial IOC fill comes in whole steps: 12,345 units fill 12,000, and a part
// below one step cancels the order whole, nothing executed.
func TestPartialIOCFillsInWholeSteps(t *testing.T) {
	s, err := New(Config{Prices: fixedQuote{"1.1000", "1.1002"}, PartStep: dec("1000")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, units, want, status string
	}{
		{"a", "12345", "12000", statusCanceled},
		{"b", "345", "0", statusCanceled},
	} {
		part := dec(c.units)
		if err := s.InjectFault(Fault{Kind: FaultPartial, Units: &part}); err != nil {
			t.Fatal(err)
		}
		s.book.order(c.id, "EURUSD", sideBuy, dec("20000"), "3", 1, false)
		if o, _ := s.book.status(c.id); o.Status != c.status || !o.CumQty.Equal(dec(c.want)) {
			t.Fatalf("IOC under a partial of %s: %+v, want %s filled", c.units, o, c.want)
		}
	}
	if units, _ := s.book.net("EURUSD"); !units.Equal(dec("12000")) {
		t.Fatalf("net %s, want 12000", units)
	}
}
