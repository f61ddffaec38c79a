package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/field"
	newordersingle "github.com/quickfixgo/fix44/newordersingle"
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/quickfix/config"
	"github.com/shopspring/decimal"
)

// libraryFloor is the FIX burst's second control: QuickFIX/Go alone handing n NewOrderSingles
// released at once to one logged-on FIX 4.4 session (memory stores, an acceptor in this process
// that reads and drops them, the desk's yield after each hand-over), at GOMAXPROCS procs. It
// returns the time from the release to each SendToTarget's return — where the desk's own time
// ends too — sorted: the part of the FIX own time that belongs to the library (building,
// storing and queueing each message, its session loop writing the ones before) with no desk
// code around it.
func libraryFloor(t *testing.T, n, procs int) []time.Duration {
	t.Helper()
	if procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	}
	_, port, _ := net.SplitHostPort(freeLoopback(t))
	session := func(sender, target string, set map[string]string) *quickfix.Settings {
		s := quickfix.NewSettings()
		for k, v := range set {
			s.GlobalSettings().Set(k, v)
		}
		ss := quickfix.NewSessionSettings()
		ss.Set(config.BeginString, quickfix.BeginStringFIX44)
		ss.Set(config.SenderCompID, sender)
		ss.Set(config.TargetCompID, target)
		if _, err := s.AddSession(ss); err != nil {
			t.Fatal(err)
		}
		return s
	}
	venue := &floorApp{}
	acc, err := quickfix.NewAcceptor(venue, quickfix.NewMemoryStoreFactory(),
		session("FLOORV", "FLOORD", map[string]string{config.SocketAcceptHost: "127.0.0.1", config.SocketAcceptPort: port}), floorLog{})
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.Start(); err != nil {
		t.Fatal(err)
	}
	defer acc.Stop()
	desk := &floorApp{logon: make(chan quickfix.SessionID, 1)}
	ini, err := quickfix.NewInitiator(desk, quickfix.NewMemoryStoreFactory(),
		session("FLOORD", "FLOORV", map[string]string{config.SocketConnectHost: "127.0.0.1", config.SocketConnectPort: port, config.HeartBtInt: "30"}), floorLog{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ini.Start(); err != nil {
		t.Fatal(err)
	}
	defer ini.Stop()
	var id quickfix.SessionID
	select {
	case id = <-desk.logon:
	case <-time.After(10 * time.Second):
		t.Fatal("library floor: the FIX session did not log on")
	}
	qty := decimal.NewFromInt(1000)
	return releaseTogether(n, func(i int) {
		nos := newordersingle.New(field.NewClOrdID(fmt.Sprintf("F%d.c1", i)), field.NewSide(enum.Side_SELL),
			field.NewTransactTimeWithPrecision(time.Now().UTC(), quickfix.Millis), field.NewOrdType(enum.OrdType_MARKET))
		nos.SetAccount("floor")
		nos.SetSymbol("EURUSD")
		nos.SetOrderQty(qty, 0)
		nos.SetTimeInForce(enum.TimeInForce_IMMEDIATE_OR_CANCEL)
		if err := quickfix.SendToTarget(nos.ToMessage(), id); err != nil {
			t.Error(err)
		}
	})
}

// floorApp is both ends of the library floor's session: it accepts everything and keeps nothing.
type floorApp struct{ logon chan quickfix.SessionID }

func (a *floorApp) OnCreate(quickfix.SessionID) {}
func (a *floorApp) OnLogon(id quickfix.SessionID) {
	if a.logon != nil {
		select { // a second logon (a reconnect) must not block the session's goroutine
		case a.logon <- id:
		default:
		}
	}
}
func (a *floorApp) OnLogout(quickfix.SessionID)                       {}
func (a *floorApp) ToAdmin(*quickfix.Message, quickfix.SessionID)     {}
func (a *floorApp) ToApp(*quickfix.Message, quickfix.SessionID) error { return nil }
func (a *floorApp) FromAdmin(*quickfix.Message, quickfix.SessionID) quickfix.MessageRejectError {
	return nil
}
func (a *floorApp) FromApp(*quickfix.Message, quickfix.SessionID) quickfix.MessageRejectError {
	return nil
}

// floorLog yields after each hand-over to the connection's writer, as the desk's session does
// (internal/venue/fix/session.go, fixLog.OnOutgoing), and logs nothing.
type floorLog struct{}

func (floorLog) Create() (quickfix.Log, error)                             { return floorLog{}, nil }
func (floorLog) CreateSessionLog(quickfix.SessionID) (quickfix.Log, error) { return floorLog{}, nil }
func (floorLog) OnIncoming([]byte)                                         {}
func (floorLog) OnOutgoing([]byte)                                         { runtime.Gosched() }
func (floorLog) OnEvent(string)                                            {}
func (floorLog) OnEventf(string, ...any)                                   {}

// identityFloor is the FIX burst's third control: the one durable commit that identity before
// action puts in front of a burst of n closes at best — n identity rows of the desk's journal
// shape in one multi-row INSERT (as internal/venue/fix/identity.go batches them), committed on
// db, into a scratch copy of fx_fix_order. It returns the median of three such commits.
func identityFloor(t *testing.T, db *sql.DB, n int) time.Duration {
	t.Helper()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE `bench_identity_floor` LIKE `fx_fix_order`"); err != nil {
		t.Fatal(err)
	}
	defer db.ExecContext(ctx, "DROP TABLE `bench_identity_floor`")
	q := "INSERT INTO `bench_identity_floor` (`clOrdId`, `tradeId`, `symbol`, `side`, `qty`, `status`) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?), ", n), ", ")
	var took []time.Duration
	for round := range 3 {
		args := make([]any, 0, 6*n)
		for i := range n {
			args = append(args, fmt.Sprintf("F%d.c%d", i, round+1), fmt.Sprintf("F%d", i), "EURUSD", "2", "1000", "SENDING")
		}
		start := time.Now()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[1]
}
