// Package swaps owns the overnight rollover (job processFxSwaps; docs/architecture.md, «Scheduled
// jobs»): at 17:00 New York every open position accrues lots × contract size × swap points × point
// (in the quote currency) × a day multiplier — 3 on the instrument's triple-swap day, 1 on other
// weekdays, and nothing for a rollover instant that falls on a Saturday or Sunday — converted to
// the account currency through the USD hub by the trading package's own converter, and posted as
// one SWAP deal per position per rollover date.
//
// Exactly once. A position's watermark (`fx_position.swapThrough`) names the last rollover date
// settled for it. A run makes one pass over the open positions, account by account, picking those
// whose watermark is behind the last due date, and per batch, in one transaction: locks the
// accounts, then the positions (the order every writer uses), re-checks each position is still
// open, and settles every due date it held (open at the rollover instant) after its watermark —
// charged, parked as pending, or nothing (swap-free, zero) — posting the deals through the
// ledger (internal/ledger: balanceAfter, the balances and stored equity, two multi-row
// statements), adding to each position's accrued swap and moving its watermark to the last due
// date. The watermark therefore moves only together with every charge before it: never past an
// uncharged date, whatever commits meanwhile. A position that commits after the pass has gone by
// its account is left whole to the next run. (One pass per date, as this package once did, let a fill
// that committed between two date passes be seen first on the later date and never charged the
// earlier one.) A second run, a second process at the same moment, or a rerun after a crash
// therefore finds nothing left to charge; the deal's unique key `swap:<positionId>:<date>` is
// the backstop. Each charge is told (swap.charged) in the transaction that posts it — the
// batch's, or a pending charge's retry — so a rolled-back attempt tells nothing and a
// committed one tells each charge once.
//
// Catch-up. The dates due at an instant are the weekday rollovers of the last 7 days, so a
// scheduler that was down for a day charges the missed day on its next run (for positions still
// open then, at their volume then, since the desk keeps no volume history). A date older than
// the window is not charged, as a pending charge of that age expires.
//
// No conversion. A charge whose hub legs have no usable mid is parked in `fx_swap_charge` with
// its amount fixed in the quote currency, the missing legs are pinned (through the quote mirror
// in fxdesk-cron, straight into the tick engine inline), and every hourly run retries it. Seven
// days after its rollover it expires uncharged and a `swap-charge-expired` alert names it.
//
// The money jobs. MoneyJobs lists this job and reconcileFxAccounts (internal/marks) with their
// specs, so that fxdesk-cron and an inline fxdesk-web schedule exactly the same list.
//
// The package never fills, closes or quotes, and never charges a position twice for one date.
package swaps
