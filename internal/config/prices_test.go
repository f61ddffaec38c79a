package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPriceSourcesDefaultToTheFeed(t *testing.T) {
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []PriceSource{{Name: "primary", Kind: PriceSim}}
	if !slices.Equal(c.Prices.Sources, want) {
		t.Fatalf("sources = %+v, want %+v", c.Prices.Sources, want)
	}
	p := c.Prices
	if p.FloorPips != 30 || p.BandPips != 30 || p.Confirm != time.Second || p.HoldDown != 10*time.Second ||
		p.SilentFactor != 10 || p.SilentMin != time.Second || p.SilentMax != 10*time.Second {
		t.Fatalf("defaults = %+v", p)
	}
	c, err = Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_FEED": "wss://feed.example/forex"}))
	if err != nil || !slices.Equal(c.Prices.Sources, []PriceSource{{Name: "primary", Kind: PriceWebsocket, URL: "wss://feed.example/forex"}}) {
		t.Fatalf("sources = %+v, %v", c.Prices.Sources, err)
	}
}

func TestPriceSourcesParseInOrder(t *testing.T) {
	c, err := Load(Web, env(map[string]string{
		"FXDESK_HOSTNAME":         "box",
		"FXDESK_FEED":             "sim", // an env file's default does not conflict
		"FXDESK_PRICE_SOURCES":    " primary=sim, backup=sim ,lp=ws://10.0.0.7:8090/forex?apiKey=s3cret,lpfix=fix://10.0.0.8:9878?sender=DESK&target=LP",
		"FXDESK_PRICE_FLOOR_PIPS": "12.5", "FXDESK_PRICE_BAND_PIPS": "40", "FXDESK_PRICE_CONFIRM": "750ms",
		"FXDESK_PRICE_HOLD_DOWN": "0s", "FXDESK_PRICE_SILENT_FACTOR": "20", "FXDESK_PRICE_SILENT_MIN": "200ms", "FXDESK_PRICE_SILENT_MAX": "30s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []PriceSource{
		{Name: "primary", Kind: PriceSim},
		{Name: "backup", Kind: PriceSim},
		{Name: "lp", Kind: PriceWebsocket, URL: "ws://10.0.0.7:8090/forex?apiKey=s3cret"},
		{Name: "lpfix", Kind: PriceFIX, URL: "fix://10.0.0.8:9878?sender=DESK&target=LP", SenderCompID: "DESK", TargetCompID: "LP"},
	}
	if !slices.Equal(c.Prices.Sources, want) {
		t.Fatalf("sources = %+v\nwant %+v", c.Prices.Sources, want)
	}
	p := c.Prices
	if p.Sims() != 2 || p.FloorPips != 12.5 || p.BandPips != 40 || p.Confirm != 750*time.Millisecond || p.HoldDown != 0 ||
		p.SilentFactor != 20 || p.SilentMin != 200*time.Millisecond || p.SilentMax != 30*time.Second {
		t.Fatalf("settings = %+v", p)
	}
	// A key in a source's URL is a secret like the feed's.
	if !slices.Contains(c.Secrets(), "s3cret") {
		t.Fatalf("secrets %v miss the source's key", c.Secrets())
	}
	if s := priceSourcesLog(c.Prices.Sources); strings.Contains(s, "s3cret") || !strings.HasPrefix(s, "primary=sim,backup=sim,lp=ws://") {
		t.Fatalf("logged as %q", s)
	}
}

// Each bad value is refused naming the variable (and the entry) and what would be accepted.
func TestBadPriceSettingsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		kv   map[string]string
		want []string
	}{
		{map[string]string{"FXDESK_PRICE_SOURCES": "primary"}, []string{"FXDESK_PRICE_SOURCES entry 1", "name=sim"}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "primary=sim,"}, []string{"FXDESK_PRICE_SOURCES entry 2"}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "Primary=sim"}, []string{"entry 1", `"Primary"`, "lower-case"}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=sim,a=sim"}, []string{`"a" is used twice`}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=http://x:1/forex"}, []string{"entry 1 (a)", `scheme "http"`}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=fix://x:9878?sender=DESK"}, []string{"entry 1 (a)", "both CompIDs"}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=fix://x?sender=D&target=L"}, []string{"port"}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=fix://x:1?sender=D&target=L&pass=secret"}, []string{"entry 1 (a)", `unknown URL parameter "pass"`}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=sim,b=sim,c=sim,d=sim,e=sim,f=sim,g=sim,h=sim,i=sim"}, []string{"9 sources; at most 8"}},
		{map[string]string{"FXDESK_PRICE_SOURCES": "a=sim", "FXDESK_FEED": "ws://x/forex"}, []string{"FXDESK_FEED", "replaces"}},
		{map[string]string{"FXDESK_PRICE_FLOOR_PIPS": "0"}, []string{"FXDESK_PRICE_FLOOR_PIPS", "from 1 to 10000"}},
		{map[string]string{"FXDESK_PRICE_BAND_PIPS": "wide"}, []string{"FXDESK_PRICE_BAND_PIPS", "number"}},
		{map[string]string{"FXDESK_PRICE_SILENT_FACTOR": "1"}, []string{"FXDESK_PRICE_SILENT_FACTOR"}},
		{map[string]string{"FXDESK_PRICE_CONFIRM": "5ms"}, []string{"FXDESK_PRICE_CONFIRM", "10ms"}},
		{map[string]string{"FXDESK_PRICE_CONFIRM": "soon"}, []string{"FXDESK_PRICE_CONFIRM", "duration"}},
		{map[string]string{"FXDESK_PRICE_HOLD_DOWN": "-1s"}, []string{"FXDESK_PRICE_HOLD_DOWN"}},
		{map[string]string{"FXDESK_PRICE_SILENT_MIN": "10ms"}, []string{"FXDESK_PRICE_SILENT_MIN", "50ms"}},
		{map[string]string{"FXDESK_PRICE_SILENT_MIN": "5s", "FXDESK_PRICE_SILENT_MAX": "2s"}, []string{"FXDESK_PRICE_SILENT_MAX", "FXDESK_PRICE_SILENT_MIN"}},
	} {
		tc.kv["FXDESK_HOSTNAME"] = "box"
		_, err := Load(Web, env(tc.kv))
		if err == nil {
			t.Errorf("%v accepted", tc.kv)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", tc.kv, err, w)
			}
		}
	}
}
