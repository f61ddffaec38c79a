package venue

import (
	"errors"
	"testing"
)

// FuzzDecodeAnswers feeds any bytes to every answer decoder: none may panic, an outcome is
// exactly a fill or a cancel, and whatever decodes as an error answer is an *Error.
func FuzzDecodeAnswers(f *testing.F) {
	for _, seed := range []string{
		`{"orderCreateTransaction":{"id":"2","type":"MARKET_ORDER"},"orderFillTransaction":{"id":"3","orderID":"2","instrument":"EUR_USD","units":"100000","price":"1.1002","time":"2026-01-05T10:00:00.123456789Z","pl":"0.0000","tradeOpened":{"tradeID":"3","units":"100000","price":"1.1002"}},"lastTransactionID":"3"}`,
		`{"orderFillTransaction":{"id":"9","orderID":"8","instrument":"EUR_USD","units":"-5000","price":"1.1","time":"2026-01-05T10:00:00Z","pl":"-8.0000","tradesClosed":[{"tradeID":"3","units":"-5000","price":"1.1","realizedPL":"-8.0000"}],"tradeReduced":{"tradeID":"4"}},"lastTransactionID":"9"}`,
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
		var ve *Error
		if e := decodeError(400, body); !errors.As(error(e), &ve) || e.Status != 400 || (e.Code == "" && e.Message == "") {
			t.Fatalf("decodeError = %+v", e)
		}
	})
}
