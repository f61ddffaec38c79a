// Package pnl owns the dealer's P&L: what the desk earned or lost over a time range, per account
// currency and symbol — the B-book's result against its traders (realised and floating), the
// markup recorded on fills, commissions, swaps, negative balance protection's cost and the hedge
// book (docs/pnl.md).
//
// It reads the ledger (fx_deal) and the openings (fx_position) through their time indexes and
// prices open B-book positions as the fills mark them (book.Market). It must never write, and
// never read a range of the ledger without its bounds: a report costs the rows of its range.
package pnl
