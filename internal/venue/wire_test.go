package venue

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeAnswers feeds any bytes to every answer decoder: none may panic, an outcome is
// exactly a fill or a cancel, and an error answer keeps the venue's code and message or else
// a bounded start of the body.
func FuzzDecodeAnswers(f *testing.F) {
	for _, seed := range []string{
		`{"orderCreateTransaction":{"id":"2","type":"MARKET_ORDER"},"orderFillTransaction":{"id":"3","orderID":"2","instrument":"EUR_USD","units":"100000","price":"1.1002","time":"2026-01-05T10:00:00.123456789Z","pl":"0.0000","tradeOpened":{"tradeID":"3","units":"100000","price":"1.1002"}},"lastTransactionID":"3"}`,
		`{"orderFillTransaction":{"id":"9","orderID":"8","instrument":"EUR_USD","units":"-5000","price":"1.1","time":"2026-01-05T10:00:00Z","pl":"-8.0000","tradesClosed":[{"tradeID":"3","units":"-5000","price":"1.1","realizedPL":"-8.0000"}],"tradeReduced":{"tradeID":"4"}},"lastTransactionID":"9"}`,
		`{"orderFillTransaction":{"id":"3","orderID":"2","instrument":"EUR_USD","units":"-3","time":"2026-01-05T10:00:00Z","tradesClosed":[{"tradeID":"1","units":"-1","price":"1.1"},{"tradeID":"2","units":"-2","price":"1.2"}]},"lastTransactionID":"3"}`,
		`{"orderCancelTransaction":{"id":"5","orderID":"4","reason":"INSUFFICIENT_MARGIN","time":"2026-01-05T10:00:00Z"},"lastTransactionID":"5"}`,
		`{"trades":[{"id":"3","instrument":"XAU_USD","price":"2300.5","openTime":"2026-01-05T10:00:00Z","state":"OPEN","initialUnits":"10","currentUnits":"10","realizedPL":"0","closingTransactionIDs":["7"],"averageClosePrice":"2301","closeTime":"2026-01-05T11:00:00Z","clientExtensions":{"id":"c","tag":"fxdesk"}}],"lastTransactionID":"7"}`,
		`{"trade":{"id":"3","instrument":"EUR_USD","price":"1.1","openTime":"2026-01-05T10:00:00Z","state":"CLOSED","initialUnits":"1","currentUnits":"0"}}`,
		`{"order":{"id":"2","state":"CANCELLED","instrument":"EUR_USD","units":"1","cancellingTransactionID":"3","createTime":"2026-01-05T10:00:00Z","clientExtensions":{"id":"c","tag":"fxdesk"}}}`,
		`{"account":{"currency":"USD","balance":"1000000.0000","NAV":"1000000.0000","marginUsed":"0.0000","marginAvailable":"1000000.0000","marginCloseoutPercent":"0","openTradeCount":0,"lastTransactionID":"1"}}`,
		`{"transactions":[{"id":"1","type":"TRANSFER_FUNDS","time":"2026-01-05T10:00:00Z","amount":"1000000.0000"}],"lastTransactionID":"1"}`,
		`{"transaction":{"id":"3","type":"ORDER_CANCEL","reason":"MARKET_HALTED"}}`,
		`{"errorCode":"CLIENT_ORDER_ID_ALREADY_EXISTS","errorMessage":"exists"}`,
		`{"orderFillTransaction":{"id":"x"}}`, `null`, `[]`, `{"trades":null}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if out, err := decodeOutcome(body); err == nil && (out.Fill == nil) == (out.Cancelled == nil) {
			t.Fatalf("outcome %+v is not exactly one of a fill and a cancel", out)
		} else if err == nil && out.Fill != nil && out.Fill.Time.IsZero() {
			t.Fatalf("a fill without a time decoded: %+v", out.Fill)
		}
		if trades, err := decodeTrades(body); err == nil {
			for _, tr := range trades {
				if tr.OpenTime.IsZero() {
					t.Fatalf("a trade without an open time decoded: %+v", tr)
				}
			}
		}
		decodeTrade(body)
		decodeOrder(body)
		decodeSummary(body)
		decodeTransactions(body)
		decodeTransaction(body)
		checkDecodeError(t, body)
	})
}

// checkDecodeError: the venue's {"errorCode","errorMessage"} is kept as sent; any other body
// becomes the message, whole when short, else its first 200 bytes (valid UTF-8) and "…", so a
// proxy's HTML page cannot flood a log line.
func checkDecodeError(t *testing.T, body []byte) {
	t.Helper()
	e := decodeError(400, body)
	if e.Status != 400 {
		t.Fatalf("decodeError status %d, want 400", e.Status)
	}
	var a struct {
		ErrorCode    string `json:"errorCode"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &a) == nil && (a.ErrorCode != "" || a.ErrorMessage != "") {
		if e.Code != a.ErrorCode || e.Message != a.ErrorMessage {
			t.Fatalf("decodeError = %q %q, the venue said %q %q", e.Code, e.Message, a.ErrorCode, a.ErrorMessage)
		}
		return
	}
	trimmed := strings.TrimSpace(string(body))
	switch {
	case e.Code != "":
		t.Fatalf("decodeError invented code %q for a body that is not the venue's error", e.Code)
	case trimmed == "":
		if e.Message != "(empty body)" {
			t.Fatalf("decodeError of an empty body: message %q", e.Message)
		}
	case len(trimmed) <= 200:
		if e.Message != trimmed {
			t.Fatalf("decodeError of a short body: message %q, want the body %q", e.Message, trimmed)
		}
	default:
		head, cut := strings.CutSuffix(e.Message, "…")
		if !cut || len(head) > 200 || !utf8.ValidString(head) {
			t.Fatalf("decodeError of a %d-byte body: message %q, want at most 200 bytes of it and …", len(trimmed), e.Message)
		}
	}
}
