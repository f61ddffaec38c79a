package trading

import (
	"fmt"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
)

// What an account's state (set by an admin, with a reason) lets its trader do. The rules read
// the state on the locked account row, so a change applies to the next write. The risk engine's
// closes (SL, TP, stop-out) and a dealer's act whatever the state: they protect the desk and the
// trader, and the state binds the trader alone.

// traderAct is one kind of trader request a state may refuse.
type traderAct int

const (
	actOpen     traderAct = iota // a new order: every order opens a position (hedging)
	actClose                     // closing a position
	actCancel                    // cancelling a resting order
	actModify                    // changing a position's SL or TP
	actWithdraw                  // a withdrawal
)

var actWords = map[traderAct]string{actOpen: "new orders", actClose: "closing positions", actCancel: "cancelling orders",
	actModify: "changing stops", actWithdraw: "withdrawals"}

// stateRefusal is ECONFLICT when account a's state does not allow act, naming the state and
// the admin's reason; nil otherwise. ECONFLICT, as for an instrument that is close-only: the
// request is well-formed and the caller may make it, but the account's current state refuses
// it until an admin changes the state.
func stateRefusal(a book.Account, act traderAct) error {
	switch a.State {
	case fx.AccountCloseOnly:
		if act != actOpen {
			return nil
		}
		return fx.Errorf(fx.ECONFLICT, "Account %d is CLOSE_ONLY (%s): new orders are refused; closing positions, cancelling orders and withdrawals are allowed.",
			a.ID, reasonOf(a))
	case fx.AccountDisabled:
		return fx.Errorf(fx.ECONFLICT, "Account %d is DISABLED (%s): it is read-only, so %s are refused.", a.ID, reasonOf(a), actWords[act])
	}
	return nil
}

func reasonOf(a book.Account) string {
	if a.StateReason == nil || *a.StateReason == "" {
		return "no reason given"
	}
	return fmt.Sprintf("reason: %s", *a.StateReason)
}
