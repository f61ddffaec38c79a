package session

import (
	"strings"
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		panic(err)
	}
	return t
}

func ny(s string) time.Time {
	loc, err := time.LoadLocation(NewYork)
	if err != nil {
		panic(err)
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, loc)
	if err != nil {
		panic(err)
	}
	return t
}

func TestIsOpenAcrossWeekendsDSTHolidaysAndBreaks(t *testing.T) {
	t.Parallel()
	thanksgiving, err := New("early", NewYork,
		Forex().Windows(), []Holiday{ClosesEarly(2025, time.November, 28, 13*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cal  *Calendar
		at   time.Time
		want bool
	}{
		// Summer Sunday: 17:00 EDT is 21:00 UTC, so one second earlier is still the weekend.
		{"summer sunday before open", Forex(), utc("2025-06-15 20:59:59"), false},
		{"summer sunday at open", Forex(), utc("2025-06-15 21:00:00"), true},
		// Winter Sunday: 17:00 EST is 22:00 UTC; 21:00 UTC would be a summer-rule mistake.
		{"winter sunday 21:00 UTC still closed", Forex(), utc("2025-01-12 21:00:00"), false},
		{"winter sunday at open", Forex(), utc("2025-01-12 22:00:00"), true},
		// March: the clocks go forward at 02:00 that same Sunday, so the open is already 21:00 UTC.
		{"march DST sunday before open", Forex(), utc("2025-03-09 20:59:59"), false},
		{"march DST sunday open at 21:00 UTC", Forex(), utc("2025-03-09 21:00:00"), true},
		// November: the clocks go back at 02:00 that Sunday, so 21:00 UTC is only 16:00 EST.
		{"november DST sunday 21:00 UTC still closed", Forex(), utc("2025-11-02 21:00:00"), false},
		{"november DST sunday open at 22:00 UTC", Forex(), utc("2025-11-02 22:00:00"), true},
		// Friday close follows New York wall time too.
		{"summer friday just before close", Forex(), utc("2025-06-20 20:59:59"), true},
		{"summer friday at close", Forex(), utc("2025-06-20 21:00:00"), false},
		{"winter friday 21:30 UTC still open", Forex(), utc("2025-01-17 21:30:00"), true},
		{"winter friday at close", Forex(), utc("2025-01-17 22:00:00"), false},
		{"friday before march DST closes on EST", Forex(), utc("2025-03-07 21:59:59"), true},
		// The weekend in between.
		{"saturday closed", Forex(), ny("2025-06-21 12:00:00"), false},
		{"wednesday noon open", Forex(), ny("2025-06-18 12:00:00"), true},
		// Christmas (a Thursday in 2025) closes the whole local day; the evening before trades.
		{"christmas eve evening open", Forex(), ny("2025-12-24 23:59:59"), true},
		{"christmas day closed", Forex(), ny("2025-12-25 12:00:00"), false},
		{"day after christmas open", Forex(), ny("2025-12-26 00:00:00"), true},
		{"new year's day closed in any year", Forex(), ny("2031-01-01 09:00:00"), false},
		// A one-off early close applies to its date only.
		{"early close day before the close", thanksgiving, ny("2025-11-28 12:59:59"), true},
		{"early close day after the close", thanksgiving, ny("2025-11-28 13:00:00"), false},
		{"early close is not annual", thanksgiving, ny("2026-11-27 13:00:00"), true},
		// Metals open an hour after FX on Sunday and pause 17:00–18:00 Monday to Thursday.
		{"metals closed sunday 17:30 while fx is open", Metals(), ny("2025-06-15 17:30:00"), false},
		{"fx open sunday 17:30", Forex(), ny("2025-06-15 17:30:00"), true},
		{"metals open sunday 18:00", Metals(), ny("2025-06-15 18:00:00"), true},
		{"metals daily break tuesday", Metals(), ny("2025-06-17 17:30:00"), false},
		{"metals reopen after break", Metals(), ny("2025-06-17 18:00:00"), true},
		{"metals open friday before close", Metals(), ny("2025-06-20 16:59:59"), true},
		{"metals closed friday evening", Metals(), ny("2025-06-20 18:30:00"), false},
		// always-open ignores weekends and holidays.
		{"always open on saturday", AlwaysOpen(), ny("2025-06-21 12:00:00"), true},
		{"always open on christmas", AlwaysOpen(), ny("2025-12-25 12:00:00"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.cal.IsOpen(tt.at); got != tt.want {
				t.Errorf("%s IsOpen(%s = %s NY) = %v, want %v", tt.cal.Name(), tt.at.UTC().Format(time.RFC3339),
					tt.at.In(tt.cal.Location()).Format("Mon 15:04:05 MST"), got, tt.want)
			}
		})
	}
}

func TestNextChangeIsStrictlyAfterAcrossDSTHolidaysAndBreaks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cal  *Calendar
		from time.Time
		want time.Time
	}{
		// The weekend before the March change ends at 17:00 EDT = 21:00 UTC.
		{"march DST weekend reopens at 21:00 UTC", Forex(), ny("2025-03-08 12:00:00"), utc("2025-03-09 21:00:00")},
		// The weekend before the November change ends at 17:00 EST = 22:00 UTC.
		{"november DST weekend reopens at 22:00 UTC", Forex(), ny("2025-11-01 12:00:00"), utc("2025-11-02 22:00:00")},
		// Midweek, the next change is Friday's close.
		{"midweek runs to friday close", Forex(), ny("2025-06-18 12:00:00"), utc("2025-06-20 21:00:00")},
		// A holiday interrupts the week at local midnight and ends at the next one.
		{"christmas eve runs to christmas midnight", Forex(), ny("2025-12-24 12:00:00"), ny("2025-12-25 00:00:00")},
		{"christmas ends at midnight", Forex(), ny("2025-12-25 12:00:00"), ny("2025-12-26 00:00:00")},
		// Metals break: open Tuesday noon → closes 17:00, closed 17:30 → opens 18:00.
		{"metals closes for the daily break", Metals(), ny("2025-06-17 12:00:00"), ny("2025-06-17 17:00:00")},
		{"metals reopens after the break", Metals(), ny("2025-06-17 17:30:00"), ny("2025-06-17 18:00:00")},
		// Exactly at a boundary the answer is the following boundary, never t itself.
		{"at the open the next change is friday", Forex(), utc("2025-06-15 21:00:00"), utc("2025-06-20 21:00:00")},
		{"always open never changes", AlwaysOpen(), ny("2025-06-18 12:00:00"), time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.cal.NextChange(tt.from)
			if !got.Equal(tt.want) {
				t.Fatalf("NextChange(%s) = %s, want %s", tt.from.UTC(), got.UTC(), tt.want.UTC())
			}
			if got.IsZero() {
				return
			}
			before := tt.cal.IsOpen(tt.from)
			if tt.cal.IsOpen(got) == before || tt.cal.IsOpen(got.Add(-time.Nanosecond)) != before {
				t.Errorf("state does not flip exactly at %s", got.UTC())
			}
		})
	}
}

func TestTextRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []*Calendar{Forex(), Metals()} {
		back, err := FromText(c.Name(), NewYork, c.ScheduleText(), c.HolidaysText())
		if err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		// Every hour of a year that includes both DST changes and both holidays must agree.
		for at := ny("2025-01-01 00:30:00"); at.Year() == 2025; at = at.Add(time.Hour) {
			if back.IsOpen(at) != c.IsOpen(at) {
				t.Fatalf("%s: reparsed calendar disagrees at %s", c.Name(), at)
			}
		}
	}
	early, err := FromText("x", NewYork, `[{"open":"sun 17:00","close":"FRI 17:00"}]`,
		`[{"date":"2025-11-28","closedFrom":"13:00"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if early.IsOpen(ny("2025-11-28 13:30:00")) || !early.IsOpen(ny("2025-11-28 12:30:00")) {
		t.Error("early close from text not honoured")
	}
}

func TestFromTextRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tz, schedule, holidays, wantErr string
	}{
		// Each row is a mistake an operator could type into fx_session_calendar.
		{"unknown zone", "Mars/Olympus", `[{"open":"Sun 17:00","close":"Fri 17:00"}]`, ``, "load zone"},
		{"no windows", NewYork, `[]`, ``, "no open windows"},
		{"bad weekday", NewYork, `[{"open":"Sunday 17:00","close":"Fri 17:00"}]`, ``, "unknown weekday"},
		{"bad clock", NewYork, `[{"open":"Sun 25:00","close":"Fri 17:00"}]`, ``, "time of day"},
		{"not json", NewYork, `Sun 17:00`, ``, "parse weekly schedule"},
		{"bad holiday date", NewYork, `[{"open":"Sun 17:00","close":"Fri 17:00"}]`, `[{"date":"Dec 25"}]`, "not YYYY-MM-DD"},
		{"empty holiday span", NewYork, `[{"open":"Sun 17:00","close":"Fri 17:00"}]`, `[{"date":"12-25","closedFrom":"13:00","closedTo":"12:00"}]`, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := FromText("x", tt.tz, tt.schedule, tt.holidays)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegistryLooksUpBuiltinsAndOpenAlwaysInventsNone(t *testing.T) {
	t.Parallel()
	r := DefaultRegistry()
	if got := strings.Join(r.Names(), ","); got != "forex,metals" {
		t.Fatalf("names = %s", got)
	}
	sat := ny("2025-06-21 12:00:00")
	fx, ok := r.Lookup("forex")
	if !ok || fx.IsOpen(sat) {
		t.Fatalf("forex lookup = %v, open on saturday", ok)
	}
	open := r.OpenAlways()
	fx, ok = open.Lookup("forex")
	if !ok || !fx.IsOpen(sat) {
		t.Fatalf("always-open forex lookup = %v, closed on saturday", ok)
	}
	if _, ok := open.Lookup("crypto"); ok {
		t.Error("OpenAlways invented a calendar name")
	}
}
