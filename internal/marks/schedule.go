package marks

// How the scheduler runs the job, in fxdesk-cron and inline in fxdesk-web alike.
const (
	JobName = "reconcileFxAccounts"
	Spec    = "*/5 * * * *" // every five minutes
	Comment = "every 5 min: mark equity and used margin from current mids, expire GTD/DAY orders, alert on ledger drift"
)
