// Package eod freezes the book at every 17:00 New York rollover (docs/eod.md): the prices the
// desk held then, one row per account — balance, equity, margin, free margin, floating P&L,
// open positions and resting orders — and one per symbol and account currency for the desk, all
// at those prices; it checks that every frozen balance follows from the previous one and the
// day's deals, and it reads the frozen days back for statements and the desk's daily report.
//
// A trading day is named by its rollover's New York date; day D runs from the previous weekday
// rollover to D's. Weekend rollovers close no day.
//
// Once per day. The closing prices are captured by whichever process is alive at the rollover —
// the lease holder from its own engine, the cron process from the quote mirror — and the first
// capture wins the whole day: a later one adds nothing, not even a symbol the first lacked, so the
// prices a freeze read are all its day will ever list. The freeze runs in the swap job, after its charges: it writes the accounts in
// batches whose rows carry their day in the primary key, so a rerun, a concurrent run or a run
// after a crash inserts only the rows still missing and never a second figure; the day's row in
// fx_eod_day is written last and says the day is complete.
//
// Late days. A day frozen at its rollover reads each account as it stands then (its balance and
// last deal in one consistent read). A day frozen later — the cron process was down — is
// rebuilt from the ledger as it stood at the rollover (the last deal before it, the positions
// open then at their volume then) and marked at that day's captured prices, never today's. A day
// whose prices nobody captured is not frozen, and eod-prices-missing says so: its deals fall into
// the next frozen day, and nothing is invented.
//
// Reconciliation. For every account and frozen day, the previous frozen balance plus the
// account's deals after the previous snapshot's last deal, up to this one's, must equal this
// balance. A difference raises eod-reconciliation-failed naming the accounts; the snapshot is
// never rewritten to match.
package eod
