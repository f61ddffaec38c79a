package config

import (
	"strings"
	"testing"
	"time"
)

// The candles' settings default to the documented values (M1 kept 90 days, the rest for ever),
// and a bad one is refused naming its variable.
func TestCandlesSettingsDefaultAndAreCheckedByName(t *testing.T) {
	t.Parallel()
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (CandlesConfig{FlushEvery: 2 * time.Second, RetentionM1: 90 * 24 * time.Hour}); c.Candles != want {
		t.Fatalf("defaults = %+v, want %+v", c.Candles, want)
	}
	for _, kv := range []map[string]string{
		{"FXDESK_CANDLES_FLUSH": "10ms"},
		{"FXDESK_CANDLES_FLUSH": "2m"},
		{"FXDESK_CANDLES_RETENTION_M1": "90d"},
		{"FXDESK_CANDLES_RETENTION_M5": "1h"},
		{"FXDESK_CANDLES_RETENTION_H1": "-24h"},
		{"FXDESK_CANDLES_RETENTION_D1": "23h"},
	} {
		kv["FXDESK_HOSTNAME"] = "box"
		_, err := Load(Web, env(kv))
		for k := range kv {
			if k != "FXDESK_HOSTNAME" && (err == nil || !strings.Contains(err.Error(), k)) {
				t.Errorf("%v: err = %v, want one naming %s", kv, err, k)
			}
		}
	}
	c, err = Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_CANDLES_RETENTION_M1": "0", "FXDESK_CANDLES_RETENTION_H1": "8760h"}))
	if err != nil || c.Candles.RetentionM1 != 0 || c.Candles.RetentionH1 != 8760*time.Hour {
		t.Errorf("set values: %+v %v", c.Candles, err)
	}
}
