package catalog

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
)

// The one path by which a change of how accounts are marked reaches the holder's risk engine
// (docs/architecture.md, «The risk engine», "Terms"). Every admin write records an audit row in
// its own transaction, whichever process serves it; the holder follows the log and, for each
// row that names something the engine marks with — an account (its group), an account group
// (its levels and leverage cap, and the accounts in it), an instrument, a symbol group, a symbol
// override — re-derives those terms from the database and hands them to the engine. A route needs
// no call of its own: writing its audit row is what makes its change reach the engine.

// Default timings of a TermsFollower.
const (
	// TermsPoll is how often the follower reads the log when no notice woke it: the bound on how
	// late a change whose notice was lost reaches the engine.
	TermsPoll = 5 * time.Second
	// TermsGrace is how long a gap in the log's ids is waited for before it is taken for a
	// rolled-back transaction: longer than an admin transaction can stay open (InnoDB's lock wait
	// timeout is 50 s by default).
	TermsGrace = 2 * time.Minute
	termsBatch = 500
)

// marksWith lists the audit entity types whose changes alter how an account is marked. Every
// other type (tokens, settings, webhooks, alerts, routing rules, dealer actions) is skipped;
// TestAdminRoutesReachTheRiskEngine in internal/api fails when a route changes marking under a
// type missing here.
var marksWith = map[string]bool{
	"account":         true, // its group (a move)
	"account_group":   true, // its levels and leverage cap
	"instrument":      true, // status, leverage cap, symbol group
	"symbol_group":    true, // markup, hedged margin rate
	"symbol_override": true, // an account group's markup and leverage cap on a symbol
}

// TermsFollower follows the audit log on the lease holder and hands the risk engine the terms
// every marking change leaves. Apply is called from Run's goroutine only.
type TermsFollower struct {
	db    *sql.DB
	cache *Cache
	apply func(context.Context, ...risk.Change)
	poll  time.Duration
	grace time.Duration
	log   *slog.Logger
	now   func() time.Time
	wake  chan struct{}

	// low is the cursor: every row at or below it has been handled or given up. seen holds the
	// rows above it already handled, with when each was first read: a gap below a row read
	// longer than grace ago is taken for a rolled-back id.
	low  int64
	seen map[int64]time.Time
}

// TermsFollowerConfig builds a TermsFollower.
type TermsFollowerConfig struct {
	DB *sql.DB
	// Cache is the holder's catalog cache: it is re-read with each catalog change, so the holder's
	// fills and its engine take the change from the same read.
	Cache *Cache
	Apply func(context.Context, ...risk.Change) // the engine's Apply
	Poll  time.Duration                         // default TermsPoll
	Grace time.Duration                         // default TermsGrace
	Log   *slog.Logger
	Now   func() time.Time // default time.Now
}

// NewTermsFollower returns the follower; it refuses a missing dependency.
func NewTermsFollower(c TermsFollowerConfig) (*TermsFollower, error) {
	if c.DB == nil || c.Cache == nil || c.Apply == nil {
		return nil, errors.New("terms follower: DB, Cache and Apply are required")
	}
	if c.Poll <= 0 {
		c.Poll = TermsPoll
	}
	if c.Grace <= 0 {
		c.Grace = TermsGrace
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &TermsFollower{db: c.DB, cache: c.Cache, apply: c.Apply, poll: c.Poll, grace: c.Grace, log: c.Log, now: c.Now,
		wake: make(chan struct{}, 1), seen: map[int64]time.Time{}}, nil
}

// Wake asks for a read of the log now (an admin write was answered here, or a notice from
// another process arrived). It never blocks; wakes while a read is due fold into it.
func (f *TermsFollower) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run follows the log until ctx ends: at once when woken, every Poll otherwise. It starts from
// the rows settled Grace ago, so what the engine's own load may have missed is handled again
// (harmless: terms are re-derived, and the engine ignores terms it already holds). A failed read
// is logged and tried again at the next wake or poll; Run returns nil when ctx ends.
func (f *TermsFollower) Run(ctx context.Context) error {
	t := time.NewTicker(f.poll)
	defer t.Stop()
	started := false
	for {
		if !started {
			low, err := audit.Settled(ctx, f.db, f.grace)
			if err == nil {
				f.low, started = low, true
			} else if ctx.Err() == nil {
				f.log.WarnContext(ctx, "terms follower: the audit log is unreadable; tried again", slog.Any("err", err))
			}
		}
		if started {
			if err := f.Pass(ctx); err != nil && ctx.Err() == nil {
				f.log.WarnContext(ctx, "terms follower: a read of the audit log failed; tried again", slog.Any("err", err))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		case <-t.C:
		}
	}
}

// Pass reads the log above the cursor once, hands the engine the terms of every marking change
// it has not handled yet, and moves the cursor over what is settled. Run calls it; a test may
// call it instead of Run, from one goroutine.
func (f *TermsFollower) Pass(ctx context.Context) error {
	var fresh []audit.Entry
	from := f.low
	for {
		rows, err := audit.After(ctx, f.db, from, termsBatch)
		if err != nil {
			return err
		}
		now := f.now()
		for _, r := range rows {
			if _, ok := f.seen[r.ID]; !ok {
				f.seen[r.ID] = now
				fresh = append(fresh, r)
			}
		}
		if len(rows) < termsBatch {
			break
		}
		from = rows[len(rows)-1].ID
	}
	if err := f.derive(ctx, fresh); err != nil {
		for _, r := range fresh {
			delete(f.seen, r.ID) // handled again at the next pass
		}
		return err
	}
	f.advance()
	return nil
}

// advance moves the cursor over every handled row with nothing missing below it, or with a gap
// below it open for longer than grace.
func (f *TermsFollower) advance() {
	ids := slices.Sorted(maps.Keys(f.seen))
	now := f.now()
	for _, id := range ids {
		if id != f.low+1 && now.Sub(f.seen[id]) < f.grace {
			return
		}
		f.low = id
		delete(f.seen, id)
	}
}

// derive re-derives, from the database, the terms the rows' changes left and applies them.
func (f *TermsFollower) derive(ctx context.Context, rows []audit.Entry) error {
	var accounts, ids []int64
	var groups []string
	catalogChanged := false
	for _, r := range rows {
		if !marksWith[r.EntityType] {
			continue
		}
		ids = append(ids, r.ID)
		switch r.EntityType {
		case "account":
			if id, err := strconv.ParseInt(r.EntityID, 10, 64); err == nil {
				accounts = append(accounts, id)
			}
		case "account_group":
			groups = append(groups, r.EntityID)
			catalogChanged = true
		default:
			catalogChanged = true
		}
	}
	if len(accounts) == 0 && !catalogChanged {
		return nil
	}
	if catalogChanged {
		f.cache.Invalidate()
	}
	cat, err := f.cache.Get(ctx)
	if err != nil {
		return err
	}
	var changes []risk.Change
	if catalogChanged {
		// Every instrument and every group's symbol terms: a symbol group or an instrument's
		// symbol group moves the terms of many, and the engine ignores those it already holds.
		for _, in := range cat.List {
			changes = append(changes, risk.Change{Kind: risk.InstrumentUpserted, Instrument: in.RiskTerms()})
		}
		names := map[string]bool{}
		for g := range cat.AccountGroups {
			names[g] = true
		}
		for _, g := range cat.OverriddenGroups() {
			names[g] = true
		}
		for _, g := range groups {
			names[g] = true // a deleted group's terms go with it
		}
		for _, g := range slices.Sorted(maps.Keys(names)) {
			changes = append(changes, risk.Change{Kind: risk.GroupTermsSet, GroupTerms: cat.RiskGroupTerms(g)})
		}
	}
	placed, err := f.placements(ctx, accounts, groups)
	if err != nil {
		return err
	}
	for _, p := range placed {
		changes = append(changes, cat.AccountGroup(p.group).TermsChange(p.id))
	}
	f.apply(ctx, changes...)
	// Operators (and the e2e tests) read from this line that the engine has a change: the audit
	// ids are those of GET /api/admin/fx/audit.
	f.log.InfoContext(ctx, "risk engine has the terms of admin changes", slog.Any("audit", ids), slog.Int("changes", len(changes)))
	return nil
}

type placement struct {
	id    int64
	group string
}

// placements reads the group of every account named, and of every account in the groups named.
func (f *TermsFollower) placements(ctx context.Context, accounts []int64, groups []string) ([]placement, error) {
	var out []placement
	read := func(where string, args []any) error {
		got, err := store.QueryAll(ctx, f.db, "terms follower: accounts' groups", func(sc store.Scanner) (placement, error) {
			var p placement
			err := sc.Scan(&p.id, &p.group)
			return p, err
		}, "SELECT `id`, `accountGroup` FROM `fx_account` WHERE "+where, args...)
		out = append(out, got...)
		return err
	}
	slices.Sort(accounts)
	accounts = slices.Compact(accounts)
	for chunk := range slices.Chunk(accounts, termsBatch) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if err := read("`id` IN ("+placeholders(len(chunk))+")", args); err != nil {
			return nil, err
		}
	}
	slices.Sort(groups)
	for _, g := range slices.Compact(groups) {
		if err := read("`accountGroup` = ?", []any{g}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
