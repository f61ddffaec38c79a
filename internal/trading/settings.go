package trading

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// SettingQuoteStale is how old a quote may be, while its session is open, and still price a trade.
const SettingQuoteStale = "fxTradingQuoteStaleSecondsFx"

// settingRules validates each known setting; a name not listed here is refused.
var settingRules = map[string]func(string) error{
	SettingQuoteStale: func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			return fx.Errorf(fx.EINVALID, "%s must be a whole number of seconds from 1 to 3600 (got %q).", SettingQuoteStale, v)
		}
		return nil
	},
}

// Settings reads and writes fx_setting. StaleAfter is a cached read cheap enough for the tick
// engine's every state check: an atomic load, with a refresh started in the background at most
// once per refreshEvery.
type Settings struct {
	db           *sql.DB
	log          *slog.Logger
	refreshEvery time.Duration

	staleAfter atomic.Int64 // nanoseconds
	loadedAt   atomic.Int64 // unix nanoseconds of the last refresh start
	refreshing atomic.Bool
}

// NewSettings returns settings over db, holding the default until the first read.
func NewSettings(db *sql.DB, log *slog.Logger) *Settings {
	s := &Settings{db: db, log: log, refreshEvery: 5 * time.Second}
	s.staleAfter.Store(int64(tick.DefaultStaleAfter))
	return s
}

// Load reads the settings now (at boot, so the first state check already uses them).
func (s *Settings) Load(ctx context.Context) error {
	s.loadedAt.Store(time.Now().UnixNano())
	all, err := s.All(ctx)
	if err != nil {
		return err
	}
	s.apply(all)
	return nil
}

func (s *Settings) apply(all map[string]string) {
	if n, err := strconv.Atoi(all[SettingQuoteStale]); err == nil && n > 0 {
		s.staleAfter.Store(int64(time.Duration(n) * time.Second))
	}
}

// StaleAfter is fxTradingQuoteStaleSecondsFx as a duration. It never blocks on the database.
func (s *Settings) StaleAfter() time.Duration {
	if time.Now().UnixNano()-s.loadedAt.Load() > int64(s.refreshEvery) && s.refreshing.CompareAndSwap(false, true) {
		s.loadedAt.Store(time.Now().UnixNano())
		go func() {
			defer s.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := s.Load(ctx); err != nil {
				s.log.Debug("settings refresh failed; keeping the last values", slog.Any("err", err))
			}
		}()
	}
	return time.Duration(s.staleAfter.Load())
}

// All returns every setting by name.
func (s *Settings) All(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT `name`, `value` FROM `fx_setting`")
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		out[k] = v
	}
	return out, rows.Err()
}

// Put validates every change first and writes them together, or none (EINVALID names the first
// bad one, in name order).
func (s *Settings) Put(ctx context.Context, changes map[string]string) (map[string]string, error) {
	if len(changes) == 0 {
		return nil, fx.Errorf(fx.EINVALID, "No settings to change.")
	}
	names := make([]string, 0, len(changes))
	for k := range changes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		rule, ok := settingRules[k]
		if !ok {
			return nil, fx.Errorf(fx.EINVALID, "Unknown setting %q.", k)
		}
		if err := rule(changes[k]); err != nil {
			return nil, err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("write settings: %w", err)
	}
	defer tx.Rollback()
	for _, k := range names {
		if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_setting` (`name`, `value`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `value` = VALUES(`value`)", k, changes[k]); err != nil {
			return nil, fmt.Errorf("write setting %s: %w", k, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("write settings: %w", err)
	}
	all, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	s.apply(all)
	return all, nil
}
