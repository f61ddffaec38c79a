package book

import (
	"context"
	"strings"

	"fxdesk/internal/store"
)

// ListFilter is the page of a trader's list (deals, positions, orders) a read asks for: the
// entries of AccountID (0: every account of the user) in Status ("": any), with ids below
// Before (0: from the newest), at most Limit of them, newest first.
type ListFilter struct {
	AccountID int64
	Status    string
	Before    int64
	Limit     int
}

// listPage reads a page of one of userID's lists in two steps (docs/architecture.md, «Reading
// a trader's history»). First the user's account ids, on idx_fx_account_user: a user holds a
// few accounts (at most fxMaxAccountsPerUser). Then each account's page on its (accountId,
// [status,] id) index — a backward range read that stops after Limit entries — and, for
// several accounts, the newest Limit of their pages together: at most accounts × Limit rows
// are sorted, however long the history. Joining the account on the user instead sorted the
// user's whole history for every page.
//
// Each account's page names its index (byStatus with a status, byAccount without): left to
// itself the optimiser may read an account that holds much of the table by walking the primary
// key backwards and filtering, which reads the whole table for a page older than the account's
// newest rows or for an account with little in it. FORCE INDEX is the same in MySQL 8 and
// MariaDB.
func listPage[T any](ctx context.Context, q Querier, what string, scan func(store.Scanner) (T, error), userID int64, f ListFilter, cols, from, alias, byStatus, byAccount string) ([]T, error) {
	accounts, err := userAccountIDs(ctx, q, userID, f.AccountID)
	if err != nil || len(accounts) == 0 {
		return nil, err
	}
	index := byAccount
	if f.Status != "" {
		index = byStatus
	}
	sqlText, args := listPageSQL(cols, from+" FORCE INDEX (`"+index+"`)", alias, accounts, f)
	return store.QueryAll(ctx, q, what, scan, sqlText, args...)
}

// userAccountIDs is userID's account ids, or accountID alone when the user holds it (none when
// not: another's account lists nothing, as it did when the list joined on the user).
func userAccountIDs(ctx context.Context, q Querier, userID, accountID int64) ([]int64, error) {
	scanID := func(sc store.Scanner) (int64, error) {
		var id int64
		err := sc.Scan(&id)
		return id, err
	}
	if accountID != 0 {
		return store.QueryAll(ctx, q, "list the user's account", scanID,
			"SELECT `id` FROM `fx_account` WHERE `id` = ? AND `userId` = ?", accountID, userID)
	}
	return store.QueryAll(ctx, q, "list the user's accounts", scanID,
		"SELECT `id` FROM `fx_account` WHERE `userId` = ? ORDER BY `id`", userID)
}

// listPageSQL is the statement listPage sends: for one account its page alone, for several a
// UNION ALL of each account's page, then the newest f.Limit of them.
//
//	SELECT cols FROM from WHERE x.`accountId` = ? [AND x.`status` = ?] [AND x.`id` < ?] ORDER BY x.`id` DESC LIMIT ?
//	(SELECT … LIMIT ?) UNION ALL (SELECT … LIMIT ?) ORDER BY `id` DESC LIMIT ?
func listPageSQL(cols, from, alias string, accounts []int64, f ListFilter) (string, []any) {
	var one strings.Builder
	one.WriteString("SELECT " + cols + " FROM " + from + " WHERE " + alias + ".`accountId` = ?")
	if f.Status != "" {
		one.WriteString(" AND " + alias + ".`status` = ?")
	}
	if f.Before > 0 {
		one.WriteString(" AND " + alias + ".`id` < ?")
	}
	one.WriteString(" ORDER BY " + alias + ".`id` DESC LIMIT ?")
	args := make([]any, 0, len(accounts)*4+1)
	for _, a := range accounts {
		args = append(args, a)
		if f.Status != "" {
			args = append(args, f.Status)
		}
		if f.Before > 0 {
			args = append(args, f.Before)
		}
		args = append(args, f.Limit)
	}
	if len(accounts) == 1 {
		return one.String(), args
	}
	branches := make([]string, len(accounts))
	for i := range branches {
		branches[i] = "(" + one.String() + ")"
	}
	return strings.Join(branches, " UNION ALL ") + " ORDER BY `id` DESC LIMIT ?", append(args, f.Limit)
}
