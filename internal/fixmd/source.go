package fixmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/quickfix/config"

	"fxdesk/internal/tick"
)

// Source is one FIX market-data session as a tick.Source. Create it with New; the engine runs it.
type Source struct {
	cfg       Config
	log       *slog.Logger
	sessionID quickfix.SessionID
	running   atomic.Bool
	// wake tells Run that the callbacks left something: a logon, the end of the connection,
	// quotes, refusals. Capacity 1, coalescing.
	wake chan struct{}

	mu sync.Mutex // guards what follows; the library's callbacks hold it only briefly
	// loggedOn is whether the session is logged on in this attempt; ended, that its connection
	// ended (logged out, or never connected), with why.
	loggedOn bool
	ended    bool
	why      error
	// logoutText is the Text of the venue's last Logout (a refused logon says why there).
	logoutText string
	// books is the top of book per desk symbol; pending the newest quote per symbol not yet
	// offered (Run offers it).
	books   map[string]*topOfBook
	pending map[string]quote
	// reqs maps each open MDReqID to its desk symbol; subscribed is the reverse.
	reqs       map[string]string
	subscribed map[string]string
	// refused holds the venue's refusal (35=Y) per desk symbol since the last logon.
	refused map[string]string
	nextReq uint64
}

type topOfBook struct{ bid, ask float64 }

type quote struct {
	bid, ask float64
	at       time.Time
}

// New builds a source from cfg (ParseURL reads one from a URL); it connects only when run.
func New(cfg Config, log *slog.Logger) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, log: log.With(slog.String("source", cfg.Name)),
		sessionID: quickfix.SessionID{BeginString: quickfix.BeginStringFIX44, SenderCompID: cfg.SenderCompID, TargetCompID: cfg.TargetCompID},
		wake:      make(chan struct{}, 1),
		books:     map[string]*topOfBook{}, pending: map[string]quote{},
		reqs: map[string]string{}, subscribed: map[string]string{}, refused: map[string]string{}}, nil
}

var _ tick.Source = (*Source)(nil)

// Name is the source's name at the desk.
func (s *Source) Name() string { return s.cfg.Name }

// Refused is the venue's refusal text per desk symbol since the last logon (a copy).
func (s *Source) Refused() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.refused))
	for k, v := range s.refused {
		out[k] = v
	}
	return out
}

// Subscribed is the desk symbols with an open subscription now.
func (s *Source) Subscribed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.subscribed))
	for sym := range s.subscribed {
		out = append(out, sym)
	}
	return out
}

// Run keeps the session until ctx ends: it connects, subscribes feed.Wanted(), follows
// feed.WantedChanged(), offers every quote and reconnects with a back-off after every end of the
// connection (tick.Source). It returns nil when ctx ends, an error only when it is run twice at
// once.
func (s *Source) Run(ctx context.Context, feed tick.Feed) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("fixmd: source %q is already running", s.cfg.Name)
	}
	defer s.running.Store(false)
	backoff := s.cfg.BackoffMin
	for ctx.Err() == nil {
		up, why := s.attempt(ctx, feed)
		if ctx.Err() != nil {
			break
		}
		if up >= s.cfg.BackoffMax {
			backoff = s.cfg.BackoffMin
		}
		feed.SetConnected(false, why)
		// Jittered, so that several desks do not reconnect in step.
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		s.log.WarnContext(ctx, "FIX market data down; reconnecting", slog.Any("err", why), slog.Duration("in", wait), slog.Duration("wasUp", up))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		backoff = min(2*backoff, s.cfg.BackoffMax)
	}
	feed.SetConnected(false, errors.New("source stopped"))
	return nil
}

// attempt runs one initiator until its connection ends or ctx ends, and says how long the
// session was logged on and why it ended.
func (s *Source) attempt(ctx context.Context, feed tick.Feed) (up time.Duration, why error) {
	s.resetAttempt()
	init, err := quickfix.NewInitiator(s, quickfix.NewMemoryStoreFactory(), s.settings(), logFactory{s})
	if err != nil {
		return 0, fmt.Errorf("fixmd: initiator: %w", err)
	}
	if err := init.Start(); err != nil {
		return 0, fmt.Errorf("fixmd: start the initiator: %w", err)
	}
	defer init.Stop()
	logonBy := time.NewTimer(s.cfg.LogonTimeout)
	defer logonBy.Stop()
	var since time.Time
	var offers []offer
	for {
		select {
		case <-ctx.Done():
			return 0, nil
		case <-logonBy.C:
			if since.IsZero() {
				return 0, fmt.Errorf("no logon to %s within %s%s", s.cfg.Addr, s.cfg.LogonTimeout, s.logoutSuffix())
			}
		case <-feed.WantedChanged():
			if !since.IsZero() {
				s.follow(feed.Wanted())
			}
		case <-s.wake:
		}
		s.mu.Lock()
		loggedOn, ended, why := s.loggedOn, s.ended, s.why
		offers = offers[:0]
		for sym, q := range s.pending {
			offers = append(offers, offer{sym, q})
		}
		clear(s.pending)
		s.mu.Unlock()
		if loggedOn && since.IsZero() {
			since = time.Now()
			feed.SetConnected(true, nil)
			s.log.InfoContext(ctx, "FIX market data logged on", slog.String("session", s.sessionID.String()))
			s.follow(feed.Wanted())
		}
		for _, o := range offers {
			feed.Offer(o.symbol, o.q.bid, o.q.ask, o.q.at)
		}
		if ended {
			if since.IsZero() {
				return 0, why
			}
			return time.Since(since), why
		}
	}
}

type offer struct {
	symbol string
	q      quote
}

func (s *Source) resetAttempt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loggedOn, s.ended, s.why, s.logoutText = false, false, nil, ""
	clear(s.books)
	clear(s.pending)
	clear(s.reqs)
	clear(s.subscribed)
	select {
	case <-s.wake:
	default:
	}
}

func (s *Source) logoutSuffix() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logoutText == "" {
		return ""
	}
	return " (venue: " + s.logoutText + ")"
}

// signal wakes Run; never blocks.
func (s *Source) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end records that the connection ended, with why (the first reason counts).
func (s *Source) end(why error) {
	s.mu.Lock()
	if !s.ended {
		s.ended, s.why = true, why
	}
	s.mu.Unlock()
	s.signal()
}

// settings is the initiator's one session. The library's own reconnect is pushed out of the
// way (Run starts a new initiator with its back-off instead).
func (s *Source) settings() *quickfix.Settings {
	host, port, _ := net.SplitHostPort(s.cfg.Addr)
	st := quickfix.NewSettings()
	ss := quickfix.NewSessionSettings()
	ss.Set(config.BeginString, quickfix.BeginStringFIX44)
	ss.Set(config.SenderCompID, s.cfg.SenderCompID)
	ss.Set(config.TargetCompID, s.cfg.TargetCompID)
	ss.Set(config.SocketConnectHost, host)
	ss.Set(config.SocketConnectPort, port)
	ss.Set(config.HeartBtInt, strconv.Itoa(int(s.cfg.HeartBeat/time.Second)))
	ss.Set(config.ReconnectInterval, "3600")
	for _, k := range []string{config.ResetOnLogon, config.ResetOnLogout, config.ResetOnDisconnect} {
		ss.Set(k, "Y")
	}
	_, _ = st.AddSession(ss) // one session with fixed keys: it cannot be refused
	return st
}
