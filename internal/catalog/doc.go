// Package catalog owns what the dealer configures and the trading rules read: instruments with
// their trading terms, symbol groups (markup, commission, hedged margin), account groups (leverage
// cap, margin-call and stop-out levels, execution mode) and the desk settings (fx_setting: the
// quote age that may price a trade, the caps on resting orders and accounts).
//
// Cache serves the catalog to the trading rules as an immutable snapshot re-read every few
// seconds; Admin changes instruments and groups, moves accounts between groups and sets their
// states (each change audited in its transaction), and invalidates the Cache it shares with them;
// Settings holds the settings as atomic values reloaded by its Run. An admin change is validated
// whole, against the rules and the columns it is written to, before anything is written.
//
// It must never price, fill or book anything (internal/trading does), and never hand out a
// snapshot's maps for writing: every reader shares them.
package catalog
