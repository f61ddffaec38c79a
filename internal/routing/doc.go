// Package routing owns the decision of where an order executes: the routing rules of an account
// group (a match and an action, first match by priority wins), the trader profile they may read
// (closed trades, wins, profit factor, holding time — figures the close path keeps per account),
// and Route, the pure function that applies the one to the other.
//
// It must never read or write the database, price anything or send anything: the catalog stores
// and loads the rules, the trading rules keep the profile and act on Route's answer.
package routing
