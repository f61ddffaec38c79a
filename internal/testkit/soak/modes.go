package soak

import (
	"context"
	"fmt"
	"net/http"

	"fxdesk/internal/auth"
)

// The position modes' traders (docs/orders.md, «Position modes»; docs/soak.md, «The order
// lane»): beside the load's traders, a few more trade on a NETTING and on a FIFO account group,
// so that the modes' invariants (check_orders_modes.go) judge accounts the load really nets.
// They are INTERNAL, never moved between groups (a group's mode is the mode its accounts
// traded in), and added after the load's traders so a seed's other traders keep their streams.
const (
	groupNetting = "soak-netting" // NETTING, the netting traders'
	groupFIFO    = "soak-fifo"    // FIFO, the FIFO traders'
)

// modeTraders is how many traders each of the two mode groups gets for a load of n traders:
// one in six, at least one.
func modeTraders(n int) int {
	return max(1, n/6)
}

// modeGroupOf is the group of the i-th trader (0-based) of a load of n traders with m mode
// traders per group after them: "" for the load's own.
func modeGroupOf(i, n, m int) string {
	switch {
	case i < n:
		return ""
	case i < n+m:
		return groupNetting
	default:
		return groupFIFO
	}
}

// setupModes creates the two mode groups through the risk desk's API and has the dealer move
// each mode trader's new account (no positions yet) into its group, as staff would.
func (l *adminLane) setupModes(ctx context.Context, web *proc) error {
	for _, g := range []map[string]any{
		{"name": groupNetting, "positionMode": "NETTING"},
		{"name": groupFIFO, "positionMode": "FIFO"},
	} {
		if e := l.send(ctx, web, auth.RoleRisk, "setup", http.MethodPost, "/api/admin/fx/account-groups", g); !e.OK() {
			return fmt.Errorf("create account group %s: %d %s", g["name"], e.Status, e.Resp)
		}
	}
	for t, group := range l.modes {
		if e := l.send(ctx, web, auth.RoleDealer, "setup", http.MethodPost, fmt.Sprintf("/api/admin/fx/accounts/%d/group", t.account), map[string]any{"group": group}); !e.OK() {
			return fmt.Errorf("move account %d into %s: %d %s", t.account, group, e.Status, e.Resp)
		}
	}
	return nil
}
