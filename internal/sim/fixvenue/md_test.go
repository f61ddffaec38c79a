package fixvenue

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/quickfix"
)

// mdRequestMsg is a MarketDataRequest as it arrives on the wire (parsed from its bytes, so its
// repeating groups are there to read); "-" leaves a field out.
func mdRequestMsg(t *testing.T, reqID, subType, depth, updateType string, entryTypes, symbols []string) *quickfix.Message {
	t.Helper()
	var b strings.Builder
	add := func(tag, v string) {
		if v != "-" {
			b.WriteString(tag + "=" + v + "\x01")
		}
	}
	add("35", "V")
	add("262", reqID)
	add("263", subType)
	add("264", depth)
	add("265", updateType)
	add("267", itoa(len(entryTypes)))
	for _, e := range entryTypes {
		add("269", e)
	}
	add("146", itoa(len(symbols)))
	for _, s := range symbols {
		add("55", s)
	}
	body := b.String()
	raw := "8=FIX.4.4\x019=" + itoa(len(body)) + "\x01" + body
	sum := 0
	for i := range len(raw) {
		sum += int(raw[i])
	}
	raw += "10=" + pad3(sum%256) + "\x01"
	m := quickfix.NewMessage()
	if err := quickfix.ParseMessage(m, bytes.NewBufferString(raw)); err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return m
}

func itoa(n int) string { return strconv.Itoa(n) }

func pad3(n int) string { return fmt.Sprintf("%03d", n) }

// Each MarketDataRequest the venue cannot serve is refused with FIX 4.4's MDReqRejReason and a
// text naming the field; the ones it serves parse into the subscription they ask for.
func TestMarketDataRequestsRefusedWithTheirReason(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.md.subs["TAKEN"] = &mdSubscription{reqID: "TAKEN"}
	both, eur := []string{"0", "1"}, []string{"EURUSD"}
	for _, c := range []struct {
		name                       string
		reqID, sub, depth, updType string
		types, symbols             []string
		reason                     enum.MDReqRejReason
		text                       string // "" : served
	}{
		{"snapshot + updates", "A", "1", "1", "1", both, eur, "", ""},
		{"whole book, update type left out", "A", "1", "0", "-", both, eur, "", ""},
		{"bid only, full refresh", "A", "1", "1", "0", []string{"0"}, []string{"EURUSD", "GBPUSD"}, "", ""},
		{"unknown symbol", "A", "1", "1", "1", both, []string{"EURUSD", "ABCXYZ"}, enum.MDReqRejReason_UNKNOWN_SYMBOL, `unknown symbol "ABCXYZ"`},
		{"no symbol", "A", "1", "1", "1", both, nil, enum.MDReqRejReason_UNKNOWN_SYMBOL, "NoRelatedSym"},
		{"MDReqID subscribed already", "TAKEN", "1", "1", "1", both, eur, enum.MDReqRejReason_DUPLICATE_MDREQID, "subscribed already"},
		{"unknown SubscriptionRequestType", "A", "7", "1", "1", both, eur, enum.MDReqRejReason_UNSUPPORTED_SUBSCRIPTIONREQUESTTYPE, "SubscriptionRequestType"},
		{"depth 5", "A", "1", "5", "1", both, eur, enum.MDReqRejReason_UNSUPPORTED_MARKETDEPTH, "MarketDepth"},
		{"MDUpdateType 2", "A", "1", "1", "2", both, eur, enum.MDReqRejReason_UNSUPPORTED_MDUPDATETYPE, "MDUpdateType"},
		{"trades (MDEntryType 2)", "A", "1", "1", "1", []string{"0", "2"}, eur, enum.MDReqRejReason_UNSUPPORTED_MDENTRYTYPE, "MDEntryType"},
		{"no entry types", "A", "1", "1", "1", nil, eur, enum.MDReqRejReason_UNSUPPORTED_MDENTRYTYPE, "NoMDEntryTypes"},
		{"no MDReqID", "-", "1", "1", "1", both, eur, "", "MDReqID (262) is required"},
		{"unsubscribe of nothing", "B", "2", "1", "1", both, eur, "", "no subscription"},
		{"unsubscribe", "TAKEN", "2", "1", "1", both, eur, "", ""},
	} {
		req, reason, text := s.md.parseLocked(mdRequestMsg(t, c.reqID, c.sub, c.depth, c.updType, c.types, c.symbols))
		if reason != c.reason || (c.text == "") != (text == "") || !strings.Contains(text, c.text) {
			t.Errorf("%s: refused %q %q, want %q %q", c.name, reason, text, c.reason, c.text)
			continue
		}
		if c.text == "" && c.sub == "1" {
			if req.sub == nil || len(req.sub.symbols) != len(c.symbols) || req.sub.full != (c.updType == "0") || !req.sub.bid || req.sub.offer != (len(c.types) == 2) {
				t.Errorf("%s: parsed %+v", c.name, req.sub)
			}
		}
	}
}

// A MarketDataRequest on the trade session is answered there with a refusal naming the
// market-data session, never served.
func TestMarketDataOnTheTradeSessionRefused(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := mdRequestMsg(t, "A", "1", "1", "1", []string{"0", "1"}, []string{"EURUSD"})
	if rej := s.FromApp(m, s.sessionID); rej != nil {
		t.Fatalf("refused as a message: %v", rej)
	}
	if st := s.MarketData(); st.Requests != 0 || len(st.Subscriptions) != 0 {
		t.Fatalf("market data %+v after a request on the trade session; want none served", st)
	}
}
