package soak

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"fxdesk/internal/testkit/soak/invariant"
	"fxdesk/internal/yeargen"
)

// prefillSizes are the histories a soak may start from (docs/soak.md, «A pre-filled month»):
// a generated broker's month (what `make soak` runs on) or the small one the EXPLAIN test uses.
var prefillSizes = map[string]func() yeargen.Size{"month": yeargen.Month, "small": yeargen.Small}

// PrefillNames are the values -prefill takes.
var PrefillNames = []string{"month", "small", "none"}

func checkPrefill(name string) error {
	if !slices.Contains(PrefillNames, name) {
		return fmt.Errorf("-prefill=%q: want month, small or none", name)
	}
	return nil
}

// fillHistory writes the generated history name (none: nothing) into the freshly migrated
// database from seed, ending now, and returns what the checks then judge row by row: the
// accounts opened after it, the audit rows and the end-of-day days written after it. The
// history is held to the ledger's rule over sums (invariant.Scope).
func fillHistory(ctx context.Context, dsn string, db *sql.DB, name string, seed uint64, logf func(string, ...any)) (invariant.Scope, error) {
	size, ok := prefillSizes[name]
	if !ok {
		return invariant.Scope{}, nil
	}
	start := time.Now()
	loader, err := yeargen.OpenLoader(dsn)
	if err != nil {
		return invariant.Scope{}, err
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := yeargen.Fill(ctx, loader, size(), int64(seed>>1), time.Now().UTC(), log)
	loader.Close()
	if err != nil {
		return invariant.Scope{}, fmt.Errorf("pre-fill a generated %s: %w", name, err)
	}
	var sc invariant.Scope
	var day sql.NullString
	for _, b := range []struct {
		q    string
		into any
	}{
		{"SELECT COALESCE(MAX(`id`), 0) + 1 FROM `fx_account`", &sc.FirstAccount},
		{"SELECT COALESCE(MAX(`id`), 0) FROM `fx_audit`", &sc.AfterAudit},
		{"SELECT DATE_FORMAT(MAX(`tradingDay`), '%Y-%m-%d') FROM `fx_eod_day`", &day},
	} {
		if err := db.QueryRowContext(ctx, b.q).Scan(b.into); err != nil {
			return invariant.Scope{}, fmt.Errorf("pre-filled history's bounds: %s: %w", b.q, err)
		}
	}
	sc.AfterDay = day.String
	logf("soak: pre-filled a generated %s in %v: %d deals, %d positions, %d events; the checks judge accounts from %d, audit rows after %d, days after %q row by row, the history's ledger by sums",
		name, time.Since(start).Round(time.Millisecond), res.Deals, res.Positions, res.Events, sc.FirstAccount, sc.AfterAudit, sc.AfterDay)
	return sc, nil
}
