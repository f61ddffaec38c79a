package invariant

// checkOrders are the invariants of the order types and position modes (docs/orders.md,
// docs/soak.md): each judges the end state and the evidence gathered.
func checkOrders(s *Snapshot, ev *Evidence) []Result {
	var rs []Result
	for _, c := range orderChecks {
		rs = append(rs, c(s, ev))
	}
	return rs
}

// orderChecks lists them, one line each.
var orderChecks = []func(*Snapshot, *Evidence) Result{
	checkModifiedOrders,
	checkOCOAtMostOneFilled, checkStopLimitWithinLimit,
	checkBoundHonoured, checkFOKWhole, checkIOCPart, // check_orders_bound.go
	checkTrailMonotonic, checkTrailCloses,
	checkNettingOnePosition, checkFIFOOneSide, checkFIFOOldestFirst,
}
