package venue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// DefaultTimeout bounds one call when ClientConfig.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxAnswer bounds an answer body; a transactions page of 1000 entries is well under it.
const maxAnswer = 16 << 20

// ClientConfig configures a Client.
type ClientConfig struct {
	// BaseURL is the venue's REST root, e.g. https://api-fxpractice.oanda.com or the
	// simulator's URL; the client appends /v3/accounts/{AccountID}/….
	BaseURL   string
	AccountID string
	Token     string // sent as "Authorization: Bearer …"; masked in String and LogValue
	// HTTP carries the requests; nil means a client with its own copy of the default transport.
	// Its redirects are never followed: a venue answers, it does not redirect.
	HTTP *http.Client
	// Timeout bounds each call (on top of the caller's context). Default DefaultTimeout.
	Timeout time.Duration
}

// Client is the venue over HTTP, in the OANDA v20 REST shape. It is safe for concurrent use.
type Client struct {
	base    string // scheme://host[/path] without a trailing slash
	account string
	token   string
	http    *http.Client
	timeout time.Duration
}

var _ API = (*Client)(nil)

// NewClient validates cfg and returns a client.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case cfg.BaseURL == "":
		return nil, errors.New("venue client: BaseURL is required (the venue's REST root, e.g. https://api-fxpractice.oanda.com)")
	case err != nil:
		return nil, fmt.Errorf("venue client: BaseURL %q: %w", cfg.BaseURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("venue client: BaseURL %q must start with http:// or https://", cfg.BaseURL)
	case u.Host == "":
		return nil, fmt.Errorf("venue client: BaseURL %q has no host", cfg.BaseURL)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("venue client: BaseURL %q must not carry a query or a fragment", cfg.BaseURL)
	case cfg.AccountID == "":
		return nil, errors.New("venue client: AccountID is required")
	case cfg.Token == "":
		return nil, errors.New("venue client: Token is required (the venue's API token)")
	case strings.ContainsAny(cfg.Token, " \r\n"):
		return nil, errors.New("venue client: Token must not contain spaces or line breaks")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("venue client: Timeout %v must not be negative", cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	var hc http.Client
	if cfg.HTTP != nil {
		hc = *cfg.HTTP // a shallow copy shares the transport and its connections
	} else {
		hc.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{
		base:    strings.TrimSuffix(u.String(), "/"),
		account: cfg.AccountID,
		token:   cfg.Token,
		http:    &hc,
		timeout: timeout,
	}, nil
}

// String describes the client with its token masked.
func (c *Client) String() string {
	return fmt.Sprintf("venue.Client{url=%s account=%s token=%s timeout=%s}", c.base, c.account, maskToken(c.token), c.timeout)
}

// LogValue logs the client with its token masked.
func (c *Client) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", c.base),
		slog.String("account", c.account),
		slog.String("token", maskToken(c.token)),
		slog.Duration("timeout", c.timeout),
	)
}

// maskToken keeps the last four characters of a long token, so an operator can tell two
// tokens apart without the log holding one.
func maskToken(t string) string {
	if len(t) < 16 {
		return "****"
	}
	return "****" + t[len(t)-4:]
}

type wroteKey struct{}

// WithWrote returns a ctx that makes the client call fn once per call, with the time the
// request was fully written to the socket: the end of the desk's own time for a send. fn runs
// on the transport's goroutine and must be quick. Any httptrace.ClientTrace already in ctx
// still runs.
func WithWrote(ctx context.Context, fn func(time.Time)) context.Context {
	return context.WithValue(ctx, wroteKey{}, fn)
}

// PlaceMarket sends one MARKET order (FOK unless o says IOC, its priceBound when it has one,
// positionFill DEFAULT) carrying the desk's client id
// in clientExtensions and tradeClientExtensions. It is never retried.
func (c *Client) PlaceMarket(ctx context.Context, o MarketOrder) (Outcome, error) {
	what := fmt.Sprintf("place market %s %s (client id %q)", o.Symbol, o.Units, o.ClientID)
	switch {
	case o.ClientID == "":
		return Outcome{}, fmt.Errorf("%s: %w: the client id is empty", what, ErrNotSent)
	case !fx.ValidSymbol(o.Symbol):
		return Outcome{}, fmt.Errorf("%s: %w: the symbol is not six letters like EURUSD", what, ErrNotSent)
	case o.Units.IsZero():
		return Outcome{}, fmt.Errorf("%s: %w: units must not be zero", what, ErrNotSent)
	}
	body, err := encodeMarketOrder(o)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w: %v", what, ErrNotSent, err)
	}
	return c.send(ctx, what, http.MethodPost, c.path("orders"), body, http.StatusCreated)
}

// CloseTrade closes units of trade tradeID (nil: all of it). It is never retried.
func (c *Client) CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal) (Outcome, error) {
	what := fmt.Sprintf("close trade %q", tradeID)
	if units != nil {
		what = fmt.Sprintf("close %s units of trade %q", units, tradeID)
	}
	switch {
	case tradeID == "":
		return Outcome{}, fmt.Errorf("%s: %w: the trade id is empty", what, ErrNotSent)
	case units != nil && !units.IsPositive():
		return Outcome{}, fmt.Errorf("%s: %w: units must be positive", what, ErrNotSent)
	}
	body, err := encodeClose(units)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w: %v", what, ErrNotSent, err)
	}
	return c.send(ctx, what, http.MethodPut, c.path("trades", tradeID, "close"), body, http.StatusOK)
}

func (c *Client) send(ctx context.Context, what, method, target string, body []byte, wantStatus int) (Outcome, error) {
	status, answer, err := c.do(ctx, method, target, body)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", what, err)
	}
	if status != wantStatus {
		return Outcome{}, fmt.Errorf("%s: %w: status %d", what, ErrOutcomeUnknown, status)
	}
	out, err := decodeOutcome(answer)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w: %v", what, ErrOutcomeUnknown, err)
	}
	return out, nil
}

// OpenTrades lists every open trade of the account.
func (c *Client) OpenTrades(ctx context.Context) ([]Trade, error) {
	body, err := c.get(ctx, "list open trades", c.path("openTrades"))
	if err != nil {
		return nil, err
	}
	trades, err := decodeTrades(body)
	if err != nil {
		return nil, fmt.Errorf("list open trades: %w: %v", ErrOutcomeUnknown, err)
	}
	return trades, nil
}

// TradeByID reads one trade; ok=false when the venue answers 404.
func (c *Client) TradeByID(ctx context.Context, id string) (Trade, bool, error) {
	if id == "" {
		return Trade{}, false, fmt.Errorf("read trade: %w: the trade id is empty", ErrNotSent)
	}
	return c.trade(ctx, fmt.Sprintf("read trade %q", id), id)
}

// TradeByClientID reads the trade whose tradeClientExtensions.id is clientID; ok=false on 404.
func (c *Client) TradeByClientID(ctx context.Context, clientID string) (Trade, bool, error) {
	if clientID == "" {
		return Trade{}, false, fmt.Errorf("read trade by client id: %w: the client id is empty", ErrNotSent)
	}
	return c.trade(ctx, fmt.Sprintf("read trade by client id %q", clientID), "@"+clientID)
}

func (c *Client) trade(ctx context.Context, what, specifier string) (Trade, bool, error) {
	body, err := c.get(ctx, what, c.path("trades", specifier))
	if notFound(err) {
		return Trade{}, false, nil
	}
	if err != nil {
		return Trade{}, false, err
	}
	t, err := decodeTrade(body)
	if err != nil {
		return Trade{}, false, fmt.Errorf("%s: %w: %v", what, ErrOutcomeUnknown, err)
	}
	return t, true, nil
}

// OrderByClientID reads the order whose clientExtensions.id is clientID; ok=false on 404. For a
// CANCELLED order it also reads the cancelling transaction (GET …/transactions/{id}), because
// an OANDA order does not carry its cancel reason.
func (c *Client) OrderByClientID(ctx context.Context, clientID string) (OrderInfo, bool, error) {
	what := fmt.Sprintf("read order by client id %q", clientID)
	if clientID == "" {
		return OrderInfo{}, false, fmt.Errorf("%s: %w: the client id is empty", what, ErrNotSent)
	}
	body, err := c.get(ctx, what, c.path("orders", "@"+clientID))
	if notFound(err) {
		return OrderInfo{}, false, nil
	}
	if err != nil {
		return OrderInfo{}, false, err
	}
	o, cancelling, err := decodeOrder(body)
	if err != nil {
		return OrderInfo{}, false, fmt.Errorf("%s: %w: %v", what, ErrOutcomeUnknown, err)
	}
	if o.State == OrderCancelled && cancelling != 0 {
		what := fmt.Sprintf("%s: read cancelling transaction %d", what, cancelling)
		body, err := c.get(ctx, what, c.path("transactions", strconv.FormatInt(cancelling, 10)))
		if err != nil {
			return OrderInfo{}, false, err
		}
		tx, err := decodeTransaction(body)
		if err != nil {
			return OrderInfo{}, false, fmt.Errorf("%s: %w: %v", what, ErrOutcomeUnknown, err)
		}
		o.CancelReason = tx.Reason
	}
	return o, true, nil
}

// Summary reads the account's money.
func (c *Client) Summary(ctx context.Context) (Summary, error) {
	body, err := c.get(ctx, "read account summary", c.path("summary"))
	if err != nil {
		return Summary{}, err
	}
	s, err := decodeSummary(body)
	if err != nil {
		return Summary{}, fmt.Errorf("read account summary: %w: %v", ErrOutcomeUnknown, err)
	}
	return s, nil
}

// TransactionsSince lists the transactions after id, oldest first (at most the venue's page).
// It asks GET …/transactions/sinceid, which answers the transactions that follow id whatever
// their ids, never …/transactions/idrange, whose range is empty over a gap of ids.
func (c *Client) TransactionsSince(ctx context.Context, id int64) ([]Transaction, int64, error) {
	what := fmt.Sprintf("list transactions since %d", id)
	body, err := c.get(ctx, what, c.path("transactions", "sinceid")+"?id="+strconv.FormatInt(id, 10))
	if err != nil {
		return nil, 0, err
	}
	txs, last, err := decodeTransactions(body)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w: %v", what, ErrOutcomeUnknown, err)
	}
	return txs, last, nil
}

// path builds /v3/accounts/{id}/seg/seg… with every segment escaped.
func (c *Client) path(segments ...string) string {
	var b strings.Builder
	b.WriteString(c.base)
	b.WriteString("/v3/accounts/")
	b.WriteString(url.PathEscape(c.account))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// get runs a GET and expects 200; any other status is an error of its class.
func (c *Client) get(ctx context.Context, what, target string) ([]byte, error) {
	status, body, err := c.do(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s: %w: status %d", what, ErrOutcomeUnknown, status)
	}
	return body, nil
}

// notFound reports a 404 answer: the venue does not know that trade or order (yet).
func notFound(err error) bool {
	var ve *Error
	return errors.As(err, &ve) && ve.Status == http.StatusNotFound
}

// do runs one request and classifies its failure: a 4xx is *Error; a request that never reached
// the socket is ErrNotSent; anything after it was written without a readable answer (a timeout,
// a reset, a 5xx, a body cut short) is ErrOutcomeUnknown. A 2xx or 3xx is returned with its body.
func (c *Client) do(ctx context.Context, method, target string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	tr := &writeTracker{}
	if fn, ok := ctx.Value(wroteKey{}).(func(time.Time)); ok {
		tr.onWrote = fn
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: tr.wroteRequest})

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: build request: %v", ErrNotSent, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept-Datetime-Format", "RFC3339")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, tr.classify(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case resp.StatusCode >= 500:
		return 0, nil, fmt.Errorf("%w: the venue answered %d", ErrOutcomeUnknown, resp.StatusCode)
	case err != nil:
		return 0, nil, fmt.Errorf("%w: read the answer (status %d): %v", ErrOutcomeUnknown, resp.StatusCode, err)
	case len(answer) > maxAnswer:
		return 0, nil, fmt.Errorf("%w: the answer is larger than %d bytes", ErrOutcomeUnknown, maxAnswer)
	case resp.StatusCode >= 400:
		return 0, nil, decodeError(resp.StatusCode, answer)
	}
	return resp.StatusCode, answer, nil
}

// writeTracker follows one call's writes through httptrace. The transport may try a request
// more than once (a reused connection found dead before anything was written); written records
// whether any attempt finished writing.
type writeTracker struct {
	written    atomic.Bool
	writeError atomic.Bool
	once       sync.Once
	onWrote    func(time.Time)
}

func (t *writeTracker) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err != nil {
		t.writeError.Store(true)
		return
	}
	t.written.Store(true)
	if t.onWrote != nil {
		t.once.Do(func() { t.onWrote(time.Now()) })
	}
}

// classify names the class of a transport error. Only a request no attempt finished writing
// counts as not sent, and a failed write only when the last attempt never got a connection
// (the transport retries after a failed write only when nothing at all reached the socket).
func (t *writeTracker) classify(err error) error {
	if !t.written.Load() && (!t.writeError.Load() || isDialError(err)) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
