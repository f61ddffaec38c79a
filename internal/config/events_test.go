package config

import (
	"strings"
	"testing"
	"time"
)

// The feed's settings default to the documented values, and a bad one is refused naming its
// variable.
func TestEventsSettingsDefaultAndAreCheckedByName(t *testing.T) {
	t.Parallel()
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box"}))
	if err != nil {
		t.Fatal(err)
	}
	want := EventsConfig{RelayInterval: 100 * time.Millisecond, RelayBatch: 500, StreamMaxLen: 1000000, WebhookTimeout: 5 * time.Second,
		WebhookAttempts: 8, WebhookBackoff: time.Second, WebhookBackoffMax: time.Minute}
	if c.Events != want {
		t.Fatalf("defaults = %+v, want %+v", c.Events, want)
	}
	for _, kv := range []map[string]string{
		{"FXDESK_EVENTS_RELAY_INTERVAL": "1ms"},
		{"FXDESK_EVENTS_RELAY_INTERVAL": "soon"},
		{"FXDESK_EVENTS_RELAY_BATCH": "501"},
		{"FXDESK_EVENTS_RELAY_BATCH": "0"},
		{"FXDESK_EVENTS_STREAM_MAXLEN": "10"},
		{"FXDESK_EVENTS_RETENTION": "10m"},
		{"FXDESK_WEBHOOK_TIMEOUT": "10ms"},
		{"FXDESK_WEBHOOK_ATTEMPTS": "0"},
		{"FXDESK_WEBHOOK_BACKOFF": "2m"},
	} {
		kv["FXDESK_HOSTNAME"] = "box"
		_, err := Load(Web, env(kv))
		for k := range kv {
			if k != "FXDESK_HOSTNAME" && (err == nil || !strings.Contains(err.Error(), k)) {
				t.Errorf("%v: err = %v, want one naming %s", kv, err, k)
			}
		}
	}
	c, err = Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_EVENTS_RETENTION": "720h", "FXDESK_WEBHOOK_ATTEMPTS": "3"}))
	if err != nil || c.Events.Retention != 720*time.Hour || c.Events.WebhookAttempts != 3 {
		t.Errorf("set values: %+v %v", c.Events, err)
	}
}
