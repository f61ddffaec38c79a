package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/auth"
)

// Host tokens are off unless the key set's URL is set; set, they need the issuer and the
// audience and take the documented defaults for the rest.
func TestJWTSettingsDefaultAndNeedIssuerAndAudience(t *testing.T) {
	t.Parallel()
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box"}))
	if err != nil || c.JWT.Enabled() || c.JWT != (auth.JWTConfig{}) {
		t.Fatalf("no FXDESK_JWT_JWKS_URL: %+v %v", c.JWT, err)
	}
	c, err = Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_JWT_JWKS_URL": "https://host.example/.well-known/jwks.json",
		"FXDESK_JWT_ISSUER": "https://host.example", "FXDESK_JWT_AUDIENCE": "fxdesk"}))
	want := auth.JWTConfig{JWKSURL: "https://host.example/.well-known/jwks.json", Issuer: "https://host.example", Audience: "fxdesk",
		UserClaim: "sub", ScopeClaim: "scope", Leeway: 30 * time.Second, Refresh: 5 * time.Minute}
	if err != nil || c.JWT != want {
		t.Fatalf("defaults = %+v, %v; want %+v", c.JWT, err, want)
	}
	if line := c.LogValue().String(); !strings.Contains(line, "issuer=https://host.example") || !strings.Contains(line, "leeway=30s") {
		t.Errorf("startup line %s does not show the host token settings", line)
	}
	c, err = Load(Cron, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_JWT_JWKS_URL": "http://127.0.0.1:4010/.well-known/jwks.json",
		"FXDESK_JWT_ISSUER": "fxdesk-idp", "FXDESK_JWT_AUDIENCE": "fxdesk", "FXDESK_JWT_USER_CLAIM": "uid", "FXDESK_JWT_SCOPE_CLAIM": "scp",
		"FXDESK_JWT_LEEWAY": "5s", "FXDESK_JWT_REFRESH": "1h"}))
	if err != nil || c.JWT.UserClaim != "uid" || c.JWT.ScopeClaim != "scp" || c.JWT.Leeway != 5*time.Second || c.JWT.Refresh != time.Hour {
		t.Errorf("set values: %+v %v", c.JWT, err)
	}
}

// Each bad value is refused naming its variable and what would be accepted.
func TestJWTBadValuesAreRefusedWithAnActionableMessage(t *testing.T) {
	t.Parallel()
	ok := map[string]string{"FXDESK_JWT_JWKS_URL": "https://host.example/jwks", "FXDESK_JWT_ISSUER": "i", "FXDESK_JWT_AUDIENCE": "a"}
	for _, tc := range []struct {
		kv   map[string]string
		want []string
	}{
		{map[string]string{"FXDESK_JWT_JWKS_URL": "ftp://host.example/jwks"}, []string{"FXDESK_JWT_JWKS_URL", "http:// or https://"}},
		{map[string]string{"FXDESK_JWT_JWKS_URL": "host.example/jwks"}, []string{"FXDESK_JWT_JWKS_URL"}},
		{map[string]string{"FXDESK_JWT_ISSUER": ""}, []string{"FXDESK_JWT_ISSUER", "must be set"}},
		{map[string]string{"FXDESK_JWT_AUDIENCE": ""}, []string{"FXDESK_JWT_AUDIENCE", "must be set"}},
		{map[string]string{"FXDESK_JWT_LEEWAY": "10m"}, []string{"FXDESK_JWT_LEEWAY", "1s to 5m"}},
		{map[string]string{"FXDESK_JWT_LEEWAY": "0s"}, []string{"FXDESK_JWT_LEEWAY", "1s to 5m"}},
		{map[string]string{"FXDESK_JWT_LEEWAY": "a bit"}, []string{"FXDESK_JWT_LEEWAY", "duration"}},
		{map[string]string{"FXDESK_JWT_REFRESH": "1s"}, []string{"FXDESK_JWT_REFRESH", "10s to 24h"}},
		{map[string]string{"FXDESK_JWT_REFRESH": "48h"}, []string{"FXDESK_JWT_REFRESH", "10s to 24h"}},
		// Half a configuration would leave host tokens silently off.
		{map[string]string{"FXDESK_JWT_JWKS_URL": "", "FXDESK_JWT_ISSUER": "i"}, []string{"FXDESK_JWT_ISSUER", "FXDESK_JWT_AUDIENCE", "without FXDESK_JWT_JWKS_URL"}},
	} {
		kv := map[string]string{"FXDESK_HOSTNAME": "box"}
		for k, v := range ok {
			kv[k] = v
		}
		for k, v := range tc.kv {
			kv[k] = v
		}
		_, err := Load(Web, env(kv))
		if err == nil {
			t.Errorf("%v: accepted", tc.kv)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not mention %q", tc.kv, err, w)
			}
		}
	}
}

// Credentials written into the key set's URL are secrets: masked in the startup line and in a
// refusal, listed for the log redactor.
func TestJWKSURLCredentialsAreMasked(t *testing.T) {
	t.Parallel()
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_JWT_JWKS_URL": "https://desk:jw-s3cret@host.example/jwks?access_token=jw-t0ken",
		"FXDESK_JWT_ISSUER": "i", "FXDESK_JWT_AUDIENCE": "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Secrets(); !slices.Contains(s, "jw-s3cret") || !slices.Contains(s, "jw-t0ken") {
		t.Errorf("Secrets() = %q, want the key set URL's password and token", s)
	}
	if line := c.LogValue().String(); strings.Contains(line, "jw-s3cret") || strings.Contains(line, "jw-t0ken") || !strings.Contains(line, "host.example") {
		t.Errorf("startup line %s: want the host shown and the credentials masked", line)
	}
	_, err = Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_JWT_JWKS_URL": "ftp://desk:jw-s3cret@host.example/jwks?access_token=jw-t0ken",
		"FXDESK_JWT_ISSUER": "i", "FXDESK_JWT_AUDIENCE": "a"}))
	if err == nil || strings.Contains(err.Error(), "jw-s3cret") || strings.Contains(err.Error(), "jw-t0ken") {
		t.Errorf("refused URL: %v, want refused with its credentials masked", err)
	}
}
