package api

import (
	"bytes"
	"strings"
	"testing"

	"fxdesk/internal/fx"
)

// The close-by and position-mode decoders accept only what the service can act on, and refuse
// everything else as EINVALID.
func FuzzDecodeCloseByAndMode(f *testing.F) {
	for _, s := range []string{`{"oppositeId":7}`, `{"oppositeId":7,"requestNonce":"cb-1"}`, `{"oppositeId":0}`, `{"oppositeId":-3}`, `{"oppositeId":"7"}`,
		`{"requestNonce":"x y","oppositeId":1}`, `{}`, ``, `{"oppositeId":1}{}`, `{"positionMode":"NETTING"}`, `{"positionMode":"netting"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if opp, nonce, err := decodeCloseBy(bytes.NewReader(b)); err == nil {
			if opp <= 0 || len(nonce) > 64 || strings.ContainsAny(nonce, " \t\n") {
				t.Fatalf("close-by accepted opposite %d nonce %q", opp, nonce)
			}
		} else if fx.ErrorCode(err) != fx.EINVALID {
			t.Fatalf("close-by refusal with code %s: %v", fx.ErrorCode(err), err)
		}
		_, p, err := decodeAccountGroup(bytes.NewReader(b), false)
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("group refusal with code %s: %v", fx.ErrorCode(err), err)
			}
			return
		}
		if p.PositionMode != nil && !p.PositionMode.Valid() {
			t.Fatalf("group accepted positionMode %q", *p.PositionMode)
		}
	})
}
