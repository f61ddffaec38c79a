package api

import (
	"bytes"
	"testing"

	"fxdesk/internal/fx"
)

// TestDecodeTrailingStop: absent leaves it, null removes it, distance or pips sets it; each bad
// shape is refused as EINVALID.
func TestDecodeTrailingStop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body       string
		set        bool
		dist, pips string
	}{
		{`{"sl":"1.05"}`, false, "", ""},
		{`{"trailingStop":null}`, true, "", ""},
		{`{"trailingStop":{"distance":"0.00200"}}`, true, "0.002", ""},
		{`{"trailingStop":{"pips":20}}`, true, "", "20"},
	} {
		_, _, tr, err := decodeModifyTrail(bytes.NewReader([]byte(c.body)))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		dist, pips := "", ""
		if tr.Distance != nil {
			dist = tr.Distance.String()
		}
		if tr.Pips != nil {
			pips = tr.Pips.String()
		}
		if tr.Set != c.set || dist != c.dist || pips != c.pips {
			t.Fatalf("%s: %+v", c.body, tr)
		}
	}
	for _, bad := range []string{
		`{"trailingStop":{}}`,
		`{"trailingStop":{"distance":"0.002","pips":20}}`,
		`{"trailingStop":{"distance":"-0.002"}}`,
		`{"trailingStop":{"distance":"0"}}`,
		`{"trailingStop":{"distance":0.002}}`,
		`{"trailingStop":{"pips":0}}`,
		`{"trailingStop":{"pips":2.5}}`,
		`{"trailingStop":{"pips":20,"pips":30}}`,
		`{"trailingStop":{"Pips":20}}`,
		`{"trailingStop":{"step":1}}`,
		`{"trailingStop":"0.002"}`,
		`{"trailingStop":[1]}`,
	} {
		if _, _, _, err := decodeModifyTrail(bytes.NewReader([]byte(bad))); fx.ErrorCode(err) != fx.EINVALID {
			t.Fatalf("%s: %v, want EINVALID", bad, err)
		}
	}
}

func FuzzDecodeTrailingStop(f *testing.F) {
	for _, s := range []string{`{"trailingStop":null}`, `{"trailingStop":{"distance":"0.002"}}`, `{"trailingStop":{"pips":20}}`, `{"trailingStop":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, tr, err := decodeModifyTrail(bytes.NewReader(b))
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("refusal with code %s", fx.ErrorCode(err))
			}
			return
		}
		if tr.Distance != nil && tr.Pips != nil {
			t.Fatalf("accepted both distance and pips: %+v", tr)
		}
		if (tr.Distance != nil && !tr.Distance.IsPositive()) || (tr.Pips != nil && !tr.Pips.IsPositive()) {
			t.Fatalf("accepted a non-positive trail: %+v", tr)
		}
	})
}
