package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// SettingQuoteStale is how old a quote may be, while its session is open, and still price a trade.
const SettingQuoteStale = "fxTradingQuoteStaleSecondsFx"

// SettingMaxPendingOrders caps the resting (PENDING) LIMIT and STOP orders of one account: every
// one is watched by the risk engine on every tick of its symbol.
const SettingMaxPendingOrders = "fxMaxPendingOrdersPerAccount"

// SettingMaxAccountsPerUser caps the trading accounts one user may open.
const SettingMaxAccountsPerUser = "fxMaxAccountsPerUser"

// SettingFourEyesAbove is the amount above which a deposit or a withdrawal by desk staff waits
// for a second finance user's approval, in units of the account's own currency (the same figure
// for a USD and a JPY account), or FourEyesOff for none (docs/identity.md, «Four eyes on client
// money»). Only the superadmin changes it.
const SettingFourEyesAbove = "fxFourEyesAbove"

// FourEyesOff is fxFourEyesAbove's value that makes every staff deposit and withdrawal at once.
const FourEyesOff = "off"

// Defaults of the caps, used until a value is stored (and by a desk that never stored one).
const (
	DefaultMaxPendingOrders   = 100
	DefaultMaxAccountsPerUser = 10
	DefaultFourEyesAbove      = "10000"
)

// fourEyesMax bounds fxFourEyesAbove as the desk bounds one deposit (trading's checkAmount).
var fourEyesMax = decimal.New(1, 15)

// fourEyesRule is fxFourEyesAbove's rule: FourEyesOff, or an amount from 0 to fourEyesMax with at
// most fx.MaxMoneyPlaces decimals (0: every staff deposit and withdrawal waits).
func fourEyesRule(v string) error {
	if _, _, err := parseFourEyes(v); err != nil {
		return err
	}
	return nil
}

// parseFourEyes reads fxFourEyesAbove: the amount, and on false when it is FourEyesOff.
func parseFourEyes(v string) (above decimal.Decimal, on bool, err error) {
	if v == FourEyesOff {
		return decimal.Decimal{}, false, nil
	}
	d, err := fx.ParseDecimal(SettingFourEyesAbove, v, fx.MaxMoneyPlaces)
	if err != nil || d.IsNegative() || d.GreaterThan(fourEyesMax) {
		return decimal.Decimal{}, false, fx.Errorf(fx.EINVALID, "%s must be an amount from 0 to %s in the account's currency units with at most %d decimals, or %q (got %q).",
			SettingFourEyesAbove, fourEyesMax, fx.MaxMoneyPlaces, FourEyesOff, v)
	}
	return d, true, nil
}

// wholeSetting is the rule of a setting holding a whole number from lo to hi (unit names it).
func wholeSetting(name string, lo, hi int, unit string) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fx.Errorf(fx.EINVALID, "%s must be a whole number of %s from %d to %d (got %q).", name, unit, lo, hi, v)
		}
		return nil
	}
}

// settingRules validates each known setting; a name not listed here is refused. Values are
// stored as text (fx_setting.value, VARCHAR(255)); the ranges keep them far inside an int.
var settingRules = map[string]func(string) error{
	SettingQuoteStale:         wholeSetting(SettingQuoteStale, 1, 3600, "seconds"),
	SettingMaxPendingOrders:   wholeSetting(SettingMaxPendingOrders, 1, 10000, "orders"),
	SettingMaxAccountsPerUser: wholeSetting(SettingMaxAccountsPerUser, 1, 1000, "accounts"),
	SettingHedgeBand:          lotsSetting(SettingHedgeBand, false),
	SettingHedgeMin:           lotsSetting(SettingHedgeMin, false),
	SettingFourEyesAbove:      fourEyesRule,
}

// ruleFor is the rule of a setting: a listed name's, or a symbol's hedge limit
// (fxHedgeLimitLots.EURUSD; whether the desk lists the symbol is checked against the database).
func ruleFor(name string) (func(string) error, bool) {
	if rule, ok := settingRules[name]; ok {
		return rule, true
	}
	if strings.HasPrefix(name, SettingHedgeLimitPrefix) {
		return lotsSetting(name, true), true
	}
	return nil, false
}

// Settings reads and writes fx_setting. Its accessors (StaleAfter, MaxPendingOrders,
// MaxAccountsPerUser, HedgeTerms, FourEyesAbove) are cached reads cheap enough for the tick engine's every state check: an
// atomic load. Run reloads them every refreshEvery, so a change written by another process
// applies here within seconds; a change written here applies at once.
type Settings struct {
	db           *sql.DB
	log          *slog.Logger
	refreshEvery time.Duration

	staleAfter         atomic.Int64 // nanoseconds
	maxPendingOrders   atomic.Int64
	maxAccountsPerUser atomic.Int64
	hedge              atomic.Pointer[HedgeTerms]
	fourEyes           atomic.Pointer[fourEyes]
}

// fourEyes is fxFourEyesAbove as read: the amount, and whether it applies at all.
type fourEyes struct {
	above decimal.Decimal
	on    bool
}

// NewSettings returns settings over db, holding the defaults until the first read.
func NewSettings(db *sql.DB, log *slog.Logger) *Settings {
	s := &Settings{db: db, log: log, refreshEvery: 5 * time.Second}
	s.staleAfter.Store(int64(tick.DefaultStaleAfter))
	s.maxPendingOrders.Store(DefaultMaxPendingOrders)
	s.maxAccountsPerUser.Store(DefaultMaxAccountsPerUser)
	s.hedge.Store(hedgeTerms(nil))
	s.fourEyes.Store(fourEyesOf(nil))
	return s
}

// NewSettingsHolding returns settings over db holding the given caps, and the defaults
// otherwise, until Load or Run reads fx_setting: for a process, or a test, that must not see the
// stored values change under it.
func NewSettingsHolding(db *sql.DB, log *slog.Logger, maxPendingOrders, maxAccountsPerUser int) *Settings {
	s := NewSettings(db, log)
	s.maxPendingOrders.Store(int64(maxPendingOrders))
	s.maxAccountsPerUser.Store(int64(maxAccountsPerUser))
	return s
}

// Load reads the settings now (at boot, so the first state check already uses them).
func (s *Settings) Load(ctx context.Context) error {
	all, err := s.All(ctx)
	if err != nil {
		return err
	}
	s.apply(all)
	return nil
}

// apply takes the values that pass their rules; a value that does not (written by hand in
// fx_setting) leaves the last one, or the default, in force.
func (s *Settings) apply(all map[string]string) {
	whole := func(name string, into *atomic.Int64, scale int64) {
		if v, ok := all[name]; ok && settingRules[name](v) == nil {
			n, _ := strconv.Atoi(v)
			into.Store(int64(n) * scale)
		}
	}
	whole(SettingQuoteStale, &s.staleAfter, int64(time.Second))
	whole(SettingMaxPendingOrders, &s.maxPendingOrders, 1)
	whole(SettingMaxAccountsPerUser, &s.maxAccountsPerUser, 1)
	s.hedge.Store(hedgeTerms(all))
	s.fourEyes.Store(fourEyesOf(all))
}

// fourEyesOf is fxFourEyesAbove from the stored settings: the default when it was never stored
// or its value does not pass the rule.
func fourEyesOf(all map[string]string) *fourEyes {
	v, ok := all[SettingFourEyesAbove]
	if !ok || fourEyesRule(v) != nil {
		v = DefaultFourEyesAbove
	}
	above, on, _ := parseFourEyes(v)
	return &fourEyes{above: above, on: on}
}

// StaleAfter is fxTradingQuoteStaleSecondsFx as a duration. It never blocks on the database.
func (s *Settings) StaleAfter() time.Duration {
	return time.Duration(s.staleAfter.Load())
}

// MaxPendingOrders is fxMaxPendingOrdersPerAccount. It never blocks on the database.
func (s *Settings) MaxPendingOrders() int {
	return int(s.maxPendingOrders.Load())
}

// MaxAccountsPerUser is fxMaxAccountsPerUser. It never blocks on the database.
func (s *Settings) MaxAccountsPerUser() int {
	return int(s.maxAccountsPerUser.Load())
}

// FourEyesAbove is fxFourEyesAbove: the amount above which a staff deposit or withdrawal waits
// for a second approver, and on false when the setting is off. It never blocks on the database.
func (s *Settings) FourEyesAbove() (above decimal.Decimal, on bool) {
	f := s.fourEyes.Load()
	return f.above, f.on
}

// Run loads the settings at once and then every refreshEvery until ctx ends. A load that fails
// keeps the last values (the database may be away; the next one tries again).
func (s *Settings) Run(ctx context.Context) error {
	t := time.NewTicker(s.refreshEvery)
	defer t.Stop()
	for {
		loadCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := s.Load(loadCtx); err != nil && ctx.Err() == nil {
			s.log.DebugContext(ctx, "settings reload failed; keeping the last values", slog.Any("err", err))
		}
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
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
		rule, ok := ruleFor(k)
		if !ok {
			return nil, fx.Errorf(fx.EINVALID, "Unknown setting %q.", k)
		}
		if err := rule(changes[k]); err != nil {
			return nil, err
		}
	}
	if err := s.checkHedgeLimitSymbols(ctx, names); err != nil {
		return nil, err
	}
	if err := store.RetryRolledBack(ctx, func() error { return s.put(ctx, names, changes) }); err != nil {
		return nil, err
	}
	all, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	s.apply(all)
	return all, nil
}

// put is Put's transaction: names, in order, set to their values in changes. Each setting is
// one audit row (setting.update), its value before (none when it was never stored) and after.
func (s *Settings) put(ctx context.Context, names []string, changes map[string]string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write settings: %w", err)
	}
	defer tx.Rollback()
	for _, k := range names {
		var before any
		var old string
		switch err := tx.QueryRowContext(ctx, "SELECT `value` FROM `fx_setting` WHERE `name` = ? FOR UPDATE", k).Scan(&old); {
		case err == nil:
			before = settingValue{old}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read setting %s: %w", k, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_setting` (`name`, `value`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `value` = VALUES(`value`)", k, changes[k]); err != nil {
			return fmt.Errorf("write setting %s: %w", k, err)
		}
		if err := audit.Record(ctx, tx, audit.Change{Action: "setting.update", EntityType: "setting", EntityID: k, Before: before, After: settingValue{changes[k]}}); err != nil {
			return err
		}
	}
	if err := store.Commit(tx); err != nil {
		return fmt.Errorf("write settings: %w", err)
	}
	return nil
}
