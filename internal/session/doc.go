// Package session owns trading-session calendars: when an instrument group is open for
// quoting and trading, in New York local time, with a weekly schedule and holidays.
//
// A Calendar answers two questions for any instant: IsOpen, and NextChange (the next instant at
// which the answer flips). Schedules are written in wall-clock time in the calendar's zone
// (America/New_York by default), so the forex open is 17:00 New York on both sides of a daylight
// saving change — 21:00 UTC in summer, 22:00 UTC in winter — without any UTC arithmetic here.
// The zone database is embedded (time/tzdata) so a host without zoneinfo computes the same.
//
// Defaults: "forex" is open Sunday 17:00 to Friday 17:00; "metals" is open Sunday 18:00 to
// Friday 17:00 with a daily 17:00–18:00 break Monday to Thursday. Both close all day on
// 25 December and 1 January. AlwaysOpen is the calendar for FXDESK_CALENDAR=always-open.
//
// This package must never read the clock itself, keep package-level mutable state, or know
// about symbols, prices or storage: callers pass instants in and map instruments to calendars.
package session
