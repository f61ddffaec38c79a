package venue

// OpenConnections exposes the executor's count of dialled, not yet closed connections.
func OpenConnections(e *Executor) int { return e.openConnections() }
