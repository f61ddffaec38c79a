package tick

// Prices is the one read of the desk's prices, whoever holds them: this Engine on the lease
// holder, desk.Quotes on a web process, and the mirror's followers (the stream on a follower web
// process, the snapshot in fxdesk-cron). Every consumer — trading, risk, the scheduled jobs, the
// mirror's publisher — takes this interface, so a price source written for one serves them all.
type Prices interface {
	// LastTick is symbol's last accepted quote, synchronously; false when there is none this
	// process may use. Its ReceivedAt is on this process's clock, so time.Since(q.ReceivedAt)
	// is the quote's age however far away it was received.
	LastTick(symbol string) (Quote, bool)
	// SymbolState is symbol's tradability now.
	SymbolState(symbol string) State
}

var _ Prices = (*Engine)(nil)
