// Package pnl owns the dealer's P&L: what the desk earned or lost over a time range, per account
// currency and symbol — the B-book's result against its traders (realised and floating), the
// markup recorded on fills, commissions, swaps, negative balance protection's cost and the hedge
// book (docs/pnl.md).
//
// It reads the ledger (fx_deal) and the openings (fx_position) through their time indexes and
// prices open B-book positions as the fills mark them (book.Market). Whole hours and trading
// days come from its summaries (summary.go, migration 000034), which Summarise keeps — the only
// rows it writes; it never writes a money record, and never reads a range of the ledger without
// its bounds: a report costs its summarised days and hours plus the ledger rows of its partial
// hours and of what is not summarised yet.
package pnl
