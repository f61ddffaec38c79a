package auth

import (
	"slices"
	"strings"

	"fxdesk/internal/fx"
)

// Role is what a token lets its holder do. A trader's token acts on the trader's own accounts
// within its scopes; every other role is a desk staff role over the admin routes, each a named
// set of permissions (docs/identity.md, «Roles»).
type Role string

// The roles. Trader is the zero-privilege role every host-issued token has.
const (
	RoleTrader     Role = "trader"
	RoleViewer     Role = "viewer"
	RoleSupport    Role = "support"
	RoleDealer     Role = "dealer"
	RoleRisk       Role = "risk"
	RoleFinance    Role = "finance"
	RoleSuperadmin Role = "superadmin"
)

// Permission names one duty an admin route needs. Every admin route names exactly one
// (internal/api's route table); a role is the set of permissions it grants.
type Permission string

// The permissions, by duty.
const (
	// PermRead reads everything the admin routes show: accounts, terms, the desk, P&L, audit.
	PermRead Permission = "read"
	// PermAccountState blocks and unblocks accounts (support's day).
	PermAccountState Permission = "accounts.state"
	// PermDealing closes positions and cancels orders on a client's behalf, and acknowledges alerts.
	PermDealing Permission = "dealing"
	// PermRouting changes routing rules and which group an account trades under.
	PermRouting Permission = "routing"
	// PermOverrides changes a group's per-symbol overrides (spreads, markups, leverage).
	PermOverrides Permission = "overrides"
	// PermHedge changes the hedge settings (the hedger's bands, minimums and limits).
	PermHedge Permission = "hedge"
	// PermLimits changes instruments, account and symbol groups, and the desk's limits.
	PermLimits Permission = "limits"
	// PermMoney deposits, withdraws, and approves or rejects another's pending money request.
	PermMoney Permission = "money"
	// PermTokens issues, lists and revokes tokens, manages webhooks, and sets the four-eyes limit.
	PermTokens Permission = "tokens"
)

// Permissions lists every permission, for tests that walk the routes and for the docs.
var Permissions = []Permission{PermRead, PermAccountState, PermDealing, PermRouting, PermOverrides, PermHedge, PermLimits, PermMoney, PermTokens}

// grants is each staff role's permissions. Every staff role reads; only superadmin holds tokens.
var grants = map[Role][]Permission{
	RoleViewer:     {PermRead},
	RoleSupport:    {PermRead, PermAccountState},
	RoleDealer:     {PermRead, PermDealing, PermRouting, PermOverrides, PermHedge},
	RoleRisk:       {PermRead, PermLimits},
	RoleFinance:    {PermRead, PermMoney},
	RoleSuperadmin: Permissions,
}

// StaffRoles lists the staff roles, least privileged first.
var StaffRoles = []Role{RoleViewer, RoleSupport, RoleDealer, RoleRisk, RoleFinance, RoleSuperadmin}

// ParseRole reads a role's name as the API and the command line take it.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if r == RoleTrader || grants[r] != nil {
		return r, nil
	}
	return "", fx.Errorf(fx.EINVALID, "role must be one of trader, viewer, support, dealer, risk, finance, superadmin (got %q).", s)
}

// Grants reports whether role r holds permission p.
func (r Role) Grants(p Permission) bool { return slices.Contains(grants[r], p) }

// Staff reports whether r is a desk staff role (any role but trader's).
func (r Role) Staff() bool { return grants[r] != nil }

// Scope is what a trader's token may do on the trader's own accounts.
type Scope string

// The scopes: read sees accounts, orders, positions, deals, prices and events; trade also
// places, modifies, cancels and closes, opens accounts and withdraws.
const (
	ScopeRead  Scope = "read"
	ScopeTrade Scope = "trade"
)

// Scopes is a set of scopes, stored and shown as their names joined by a space ("read trade").
type Scopes []Scope

// AllScopes is a full trader token's scopes.
var AllScopes = Scopes{ScopeRead, ScopeTrade}

// ParseScopes reads a space- or comma-separated list of scope names; an empty list is refused.
func ParseScopes(s string) (Scopes, error) {
	var out Scopes
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		sc := Scope(strings.ToLower(f))
		if sc != ScopeRead && sc != ScopeTrade {
			return nil, fx.Errorf(fx.EINVALID, "scope %q is not one the desk knows: give read, trade or both.", f)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, fx.Errorf(fx.EINVALID, "scopes must name at least one of read and trade.")
	}
	slices.Sort(out)
	return out, nil
}

// Has reports whether the set holds sc.
func (s Scopes) Has(sc Scope) bool { return slices.Contains(s, sc) }

// String is the stored form: the names joined by a space.
func (s Scopes) String() string {
	names := make([]string, len(s))
	for i, sc := range s {
		names[i] = string(sc)
	}
	return strings.Join(names, " ")
}
