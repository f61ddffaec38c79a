package swaps

// How the scheduler runs the job, in fxdesk-cron and inline in fxdesk-web alike.
const (
	JobName = "processFxSwaps"
	// Spec fires at the top of every hour, New York time: the 17:00 run charges the day's
	// rollover, the others retry pending charges and catch up anything missed.
	Spec    = "0 * * * *"
	Comment = "hourly: charge the 17:00 New York rollover once per position and date; retry, pin or expire pending charges"
)
