package tick

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/session"
)

// LoadInstruments reads every instrument, ordered by symbol.
func LoadInstruments(ctx context.Context, db *sql.DB) ([]fx.Instrument, error) {
	rows, err := db.QueryContext(ctx, "SELECT `symbol`, `base`, `quote`, `digits`, `contractSize`, `point`, "+
		"`volumeMin`, `volumeStep`, `volumeMax`, `swapLong`, `swapShort`, `tripleSwapDay`, "+
		"`sessionCalendar`, `status`, `enabled`, `symbolGroup` FROM `fx_instrument` ORDER BY `symbol`")
	if err != nil {
		return nil, fmt.Errorf("load instruments: %w", err)
	}
	defer rows.Close()
	var out []fx.Instrument
	for rows.Next() {
		var in fx.Instrument
		var triple int
		var status string
		if err := rows.Scan(&in.Symbol, &in.Base, &in.Quote, &in.Digits, &in.ContractSize, &in.Point,
			&in.VolumeMin, &in.VolumeStep, &in.VolumeMax, &in.SwapLong, &in.SwapShort, &triple,
			&in.SessionCalendar, &status, &in.Enabled, &in.SymbolGroup); err != nil {
			return nil, fmt.Errorf("load instruments: scan: %w", err)
		}
		in.TripleSwapDay = time.Weekday(triple)
		in.Status = fx.InstrumentStatus(status)
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load instruments: %w", err)
	}
	return out, nil
}

// LoadCalendars reads fx_session_calendar into a registry. A row that does not parse is an
// error naming it: trading on a guessed session is worse than not starting.
func LoadCalendars(ctx context.Context, db *sql.DB) (*session.Registry, error) {
	rows, err := db.QueryContext(ctx,
		"SELECT `name`, `timezone`, `weeklySchedule`, `holidays` FROM `fx_session_calendar` ORDER BY `name`")
	if err != nil {
		return nil, fmt.Errorf("load session calendars: %w", err)
	}
	defer rows.Close()
	var cals []*session.Calendar
	for rows.Next() {
		var name, tz, weekly, holidays string
		if err := rows.Scan(&name, &tz, &weekly, &holidays); err != nil {
			return nil, fmt.Errorf("load session calendars: scan: %w", err)
		}
		c, err := session.FromText(name, tz, weekly, holidays)
		if err != nil {
			return nil, fmt.Errorf("load session calendars: %w", err)
		}
		cals = append(cals, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load session calendars: %w", err)
	}
	return session.NewRegistry(cals...), nil
}

// CalendarLookup builds a Config.CalendarFor from instruments and a registry. A symbol with no
// instrument, or whose calendar name is not registered, gets the registry's "forex" calendar
// (or none — always open — if the registry has no "forex").
func CalendarLookup(instruments []fx.Instrument, reg *session.Registry) func(symbol string) *session.Calendar {
	fallback, _ := reg.Lookup("forex")
	bySymbol := make(map[string]*session.Calendar, len(instruments))
	for _, in := range instruments {
		if c, ok := reg.Lookup(in.SessionCalendar); ok {
			bySymbol[in.Symbol] = c
		}
	}
	return func(symbol string) *session.Calendar {
		if c, ok := bySymbol[symbol]; ok {
			return c
		}
		return fallback
	}
}
