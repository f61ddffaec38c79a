package config

import (
	"strings"
	"testing"
	"time"
)

// Retention's settings default to the documented values (audit rows kept hot), and a bad one is
// refused naming its variable.
func TestRetentionSettingsDefaultAndAreCheckedByName(t *testing.T) {
	t.Parallel()
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box"}))
	if err != nil {
		t.Fatal(err)
	}
	want := RetentionConfig{Every: time.Hour, Batch: 1000, Pause: 100 * time.Millisecond}
	if c.Retention != want {
		t.Fatalf("defaults = %+v, want %+v", c.Retention, want)
	}
	for _, kv := range []map[string]string{
		{"FXDESK_RETENTION_EVERY": "10s"},
		{"FXDESK_RETENTION_EVERY": "48h"},
		{"FXDESK_RETENTION_BATCH": "5001"},
		{"FXDESK_RETENTION_BATCH": "99"},
		{"FXDESK_RETENTION_BATCH": "lots"},
		{"FXDESK_RETENTION_PAUSE": "-1s"},
		{"FXDESK_RETENTION_PAUSE": "1m"},
		{"FXDESK_AUDIT_RETENTION": "24h"},
	} {
		kv["FXDESK_HOSTNAME"] = "box"
		_, err := Load(Web, env(kv))
		for k := range kv {
			if k != "FXDESK_HOSTNAME" && (err == nil || !strings.Contains(err.Error(), k)) {
				t.Errorf("%v: err = %v, want one naming %s", kv, err, k)
			}
		}
	}
	c, err = Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_AUDIT_RETENTION": "8760h", "FXDESK_RETENTION_BATCH": "5000", "FXDESK_RETENTION_PAUSE": "0s"}))
	if err != nil || c.Retention.Audit != 8760*time.Hour || c.Retention.Batch != 5000 || c.Retention.Pause != 0 {
		t.Errorf("set values: %+v %v", c.Retention, err)
	}
}
