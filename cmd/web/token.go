package main

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/config"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

const tokenUsage = "usage: fxdesk-web token create --user ID [--role ROLE | --admin] [--scopes read,trade] [--expires DURATION] [--label TEXT] | token list [--user ID] | token revoke (--id N | --token TOKEN)"

// tokenCommand runs the token commands:
//
//	token create --user ID [--role ROLE] [--scopes S] [--expires D] [--label TEXT]   issue a token; printed alone on stdout's last line
//	token list [--user ID]                            the issued tokens (never the tokens themselves)
//	token revoke (--id N | --token TOKEN)             revoke one live token
func tokenCommand(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", tokenUsage)
	}
	fs := flag.NewFlagSet("token "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	// check validates the parsed flags before anything opens the database; run does the work.
	var check func() error
	var run func(context.Context, *sql.DB) error
	switch args[0] {
	case "create":
		user := fs.Int64("user", 0, "the platform user id the token acts for (required)")
		admin := fs.Bool("admin", false, "shorthand for --role superadmin")
		roleName := fs.String("role", "trader", "trader, or a staff role: viewer, support, dealer, risk, finance, superadmin")
		scopes := fs.String("scopes", "read,trade", "a trader's token's scopes: read, trade or both")
		expires := fs.Duration("expires", 0, "how long the token lives, e.g. 720h, at most 8784h (0: until revoked)")
		label := fs.String("label", "", "a note stored beside the token, e.g. who it was issued to")
		var g auth.Grant
		check = func() error {
			role, err := auth.ParseRole(*roleName)
			if err != nil {
				return fmt.Errorf("token create: %s", fx.ErrorMessage(err))
			}
			if *admin {
				role = auth.RoleSuperadmin
			}
			g = auth.Grant{UserID: *user, Role: role, Label: *label}
			if role == auth.RoleTrader {
				if g.Scopes, err = auth.ParseScopes(*scopes); err != nil {
					return fmt.Errorf("token create: %s", fx.ErrorMessage(err))
				}
			}
			if *expires < 0 {
				return fmt.Errorf("token create: --expires must be a positive duration, such as 720h")
			}
			if *expires > 0 {
				g.ExpiresAt = time.Now().Add(*expires)
			}
			if err := g.Check(time.Now()); err != nil {
				return fmt.Errorf("token create: %s", fx.ErrorMessage(err))
			}
			return nil
		}
		run = func(ctx context.Context, db *sql.DB) error {
			// The issue is audited as the command line's: an operator with the database's
			// credentials, no token behind them.
			token, _, err := auth.Issue(audit.WithActor(ctx, audit.Actor{Via: "cli"}), db, g)
			if err != nil {
				return err
			}
			what := string(g.Role)
			if g.Role == auth.RoleTrader {
				what += ", " + g.Scopes.String()
			}
			fmt.Fprintf(stdout, "bearer token for user %d (%s); it is shown once and stored only as a hash:\n", g.UserID, what)
			fmt.Fprintln(stdout, token)
			return nil
		}
	case "list":
		user := fs.Int64("user", 0, "only this platform user's tokens")
		check = func() error {
			if *user < 0 {
				return fmt.Errorf("token list: --user must be a whole number (0, or no --user, lists every user's)")
			}
			return nil
		}
		run = func(ctx context.Context, db *sql.DB) error {
			tokens, err := auth.List(ctx, db, auth.ListFilter{UserID: *user})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tUSER\tROLE\tSCOPES\tCREATED\tEXPIRES\tREVOKED\tLAST USED\tFROM\tLABEL")
			at := func(t *time.Time) string {
				if t == nil {
					return "-"
				}
				return t.UTC().Format(time.RFC3339)
			}
			for _, t := range tokens {
				scopes := strings.ReplaceAll(t.Scopes.String(), " ", ",") // one column
				if scopes == "" {
					scopes = "-"
				}
				fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.UserID, t.Role, scopes, t.CreatedAt.UTC().Format(time.RFC3339),
					at(t.ExpiresAt), at(t.RevokedAt), at(t.LastUsedAt), cmp.Or(t.LastUsedFrom, "-"), t.Label)
			}
			return w.Flush()
		}
	case "revoke":
		id := fs.Int64("id", 0, "the token's id, as token list shows it")
		token := fs.String("token", "", "the token itself")
		check = func() error {
			if (*id > 0) == (strings.TrimSpace(*token) != "") || *id < 0 {
				return fmt.Errorf("token revoke: give exactly one of --id N (a positive whole number) or --token TOKEN")
			}
			return nil
		}
		run = func(ctx context.Context, db *sql.DB) error {
			tokenID := *id
			if tokenID == 0 {
				var err error
				if tokenID, err = auth.IDOf(ctx, db, *token); err != nil {
					return err
				}
			}
			revoked, err := auth.Revoke(audit.WithActor(ctx, audit.Actor{Via: "cli"}), db, *id, *token)
			if err != nil {
				return err
			}
			if !revoked {
				return fmt.Errorf("token revoke: no live token matches (unknown, or already revoked)")
			}
			log.InfoContext(ctx, "api token revoked", slog.Int64("id", tokenID))
			// Every web process forgets it at once when it hears this; one that does not hears
			// of it at its next lookup, within its cache's life.
			rdb, err := store.OpenRedis(cfg.RedisURL)
			if err == nil {
				(&revocations{rdb: rdb, channel: cfg.RedisNames.TokensRevoked(), log: log}).announce(ctx, tokenID)
				rdb.Close()
			} else {
				log.WarnContext(ctx, "token revocation not announced", slog.Any("err", err))
			}
			fmt.Fprintf(stdout, "revoked; every web process refuses it once it hears the revocation, and within %s if it does not (up to %.0f min while it can reach neither Redis nor the database)\n",
				auth.CacheFor, auth.StaleFor.Minutes())
			return nil
		}
	default:
		return fmt.Errorf("unknown token command %q; %s", args[0], tokenUsage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; %s", fs.Args(), tokenUsage)
	}
	if err := check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db, err := store.OpenMigrated(ctx, cfg.MySQLDSN, log)
	if err != nil {
		return err
	}
	defer db.Close()
	return run(ctx, db)
}
