package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"fxdesk/internal/book"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
)

// The trader profile (fx_account_profile, docs/routing.md): every close adds its trade to its
// account's row in the close's own transaction, and the holder keeps the rows it has read in
// memory, moved by the closes it commits, so routing an order reads no row. A batch of the group
// commit adds all its closes' trades in one statement, one row per account whatever the account's
// history: a gap's burst of closes costs the profiles one upsert per batch, not one per close.

// profileAddSQL and profileAddTail are the statement that adds a batch's trades, one VALUES row
// per account (profileRowSQL), creating an account's row at its first trade.
const (
	profileAddSQL  = "INSERT INTO `fx_account_profile` (`accountId`, `trades`, `wins`, `grossProfit`, `grossLoss`, `holdMillis`, `underMinute`, `lastTradeAt`) VALUES "
	profileRowSQL  = "(?, ?, ?, ?, ?, ?, ?, ?)"
	profileAddTail = " ON DUPLICATE KEY UPDATE `trades` = `trades` + VALUES(`trades`), `wins` = `wins` + VALUES(`wins`), " +
		"`grossProfit` = `grossProfit` + VALUES(`grossProfit`), `grossLoss` = `grossLoss` + VALUES(`grossLoss`), " +
		"`holdMillis` = `holdMillis` + VALUES(`holdMillis`), `underMinute` = `underMinute` + VALUES(`underMinute`), `lastTradeAt` = VALUES(`lastTradeAt`)"
)

// addTrade adds trade t of account to the batch's trades, written at its end.
func addTrade(b *book.Batch, account int64, t routing.Profile) {
	b.Gathered("profiles", func() book.Gather { return &trades{by: map[int64]routing.Profile{}} }).(*trades).add(account, t)
}

// trades is a batch's closed trades summed per account (a book.Gather).
type trades struct {
	accounts []int64
	by       map[int64]routing.Profile
}

func (g *trades) add(account int64, t routing.Profile) {
	if p, ok := g.by[account]; ok {
		g.by[account] = p.Add(t)
		return
	}
	g.accounts = append(g.accounts, account)
	g.by[account] = t
}

func (g *trades) Merge(o book.Gather) {
	other := o.(*trades)
	for _, id := range other.accounts {
		g.add(id, other.by[id])
	}
}

// Flush writes the rows in account order, the order every writer of the desk takes accounts in.
func (g *trades) Flush(b *book.Batch) {
	if len(g.accounts) == 0 {
		return
	}
	slices.Sort(g.accounts)
	var text strings.Builder
	text.WriteString(profileAddSQL)
	args := make([]any, 0, 8*len(g.accounts))
	for i, id := range g.accounts {
		if i > 0 {
			text.WriteString(", ")
		}
		text.WriteString(profileRowSQL)
		t := g.by[id]
		args = append(args, id, t.Trades, t.Wins, t.GrossProfit, t.GrossLoss, t.HoldMillis, t.UnderMinute, t.LastTradeAt)
	}
	text.WriteString(profileAddTail)
	b.Exec(text.String(), args...)
}

const profileCols = "`trades`, `wins`, `grossProfit`, `grossLoss`, `holdMillis`, `underMinute`, `lastTradeAt`"

func scanProfile(sc store.Scanner) (routing.Profile, error) {
	var p routing.Profile
	err := sc.Scan(&p.Trades, &p.Wins, &p.GrossProfit, &p.GrossLoss, &p.HoldMillis, &p.UnderMinute, &p.LastTradeAt)
	if p.LastTradeAt != nil {
		t := p.LastTradeAt.UTC()
		p.LastTradeAt = &t
	}
	return p, err
}

// loadProfile reads account's profile; an account that never closed a trade has an empty one.
func loadProfile(ctx context.Context, q book.Querier, account int64) (routing.Profile, error) {
	p, err := scanProfile(q.QueryRowContext(ctx, "SELECT "+profileCols+" FROM `fx_account_profile` WHERE `accountId` = ?", account))
	if errors.Is(err, sql.ErrNoRows) {
		return routing.Profile{}, nil
	}
	if err != nil {
		return routing.Profile{}, fmt.Errorf("load profile of account %d: %w", account, err)
	}
	return p, nil
}

// Profile is account id's trader profile, as the dealer reads it (ENOTFOUND without the account).
func (a *Accounts) Profile(ctx context.Context, id int64) (book.Account, routing.Profile, error) {
	acct, err := book.LoadAccount(ctx, a.s.db, 0, id)
	if err != nil {
		return acct, routing.Profile{}, err
	}
	p, err := loadProfile(ctx, a.s.db, id)
	return acct, p, err
}

// Profiles reads the profiles of accounts, keyed by account; one without a row is left out.
func (a *Accounts) Profiles(ctx context.Context, accounts []int64) (map[int64]routing.Profile, error) {
	out := map[int64]routing.Profile{}
	if len(accounts) == 0 {
		return out, nil
	}
	rows, err := a.s.db.QueryContext(ctx, "SELECT `accountId`, "+profileCols+" FROM `fx_account_profile` WHERE `accountId` IN ("+store.Placeholders(len(accounts))+")", store.Int64Args(accounts)...)
	if err != nil {
		return nil, fmt.Errorf("load profiles: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var p routing.Profile
		if err := rows.Scan(&id, &p.Trades, &p.Wins, &p.GrossProfit, &p.GrossLoss, &p.HoldMillis, &p.UnderMinute, &p.LastTradeAt); err != nil {
			return nil, fmt.Errorf("load profiles: %w", err)
		}
		if p.LastTradeAt != nil {
			t := p.LastTradeAt.UTC()
			p.LastTradeAt = &t
		}
		out[id] = p
	}
	return out, rows.Err()
}

// profiles is the holder's memory of the profiles routing has read: an account's entry is read
// once and then moved by every close this process commits, which on the holder is every close.
// A read racing a close of its account is not kept (the account's generation moved), and the
// memory starts again empty when the lease term changes, since another holder may have closed
// trades meanwhile.
type profiles struct {
	mu    sync.Mutex
	term  int64
	epoch uint64 // resets so far: a read from before a reset is never kept
	m     map[int64]routing.Profile
	gen   map[int64]uint64 // closes committed per account since the last reset
}

// stamp is when a read started: the memory's epoch and the account's generation.
type stamp struct{ epoch, gen uint64 }

// maxProfiles bounds the memory; past it, it starts again empty.
const maxProfiles = 100_000

func (c *profiles) reset(term int64) {
	c.term, c.m, c.gen = term, map[int64]routing.Profile{}, map[int64]uint64{}
	c.epoch++
}

func (c *profiles) get(term, account int64) (routing.Profile, stamp, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term != term || c.m == nil {
		c.reset(term)
	}
	p, ok := c.m[account]
	return p, stamp{c.epoch, c.gen[account]}, ok
}

// put keeps p, read since at, unless the memory was reset or a close of the account committed
// since.
func (c *profiles) put(term, account int64, at stamp, p routing.Profile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term != term || at != (stamp{c.epoch, c.gen[account]}) {
		return
	}
	if len(c.m) >= maxProfiles {
		c.reset(term)
		return
	}
	c.m[account] = p
}

// closed adds a committed close's trade t to account's entry, if it has one.
func (c *profiles) closed(account int64, t routing.Profile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		return
	}
	if len(c.gen) >= maxProfiles {
		c.reset(c.term)
	}
	c.gen[account]++
	if p, ok := c.m[account]; ok {
		c.m[account] = p.Add(t)
	}
}

// profileFor is account's profile for routing: from memory, or read once.
func (s *Service) profileFor(ctx context.Context, account int64) (routing.Profile, error) {
	term := s.term()
	p, gen, ok := s.profiles.get(term, account)
	if ok {
		return p, nil
	}
	p, err := loadProfile(ctx, s.db, account)
	if err != nil {
		return p, err
	}
	s.profiles.put(term, account, gen, p)
	return p, nil
}
