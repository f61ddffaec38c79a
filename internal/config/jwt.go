package config

import (
	"fmt"
	"strings"
	"time"

	"fxdesk/internal/auth"
)

// jwtKeys are the host token settings other than the key set's URL, which mean nothing without it.
var jwtKeys = []string{"FXDESK_JWT_ISSUER", "FXDESK_JWT_AUDIENCE", "FXDESK_JWT_USER_CLAIM", "FXDESK_JWT_SCOPE_CLAIM", "FXDESK_JWT_LEEWAY", "FXDESK_JWT_REFRESH"}

// loadJWT reads the host token settings (docs/identity.md). Their rules live with the verifier
// (auth.JWTConfig.Check); this reads them and refuses a half-set configuration, which would
// otherwise leave host tokens silently off.
func loadJWT(env func(key, def string) string, duration func(key, def string) time.Duration) (auth.JWTConfig, []error) {
	var errs []error
	j := auth.JWTConfig{JWKSURL: env("FXDESK_JWT_JWKS_URL", "")}
	if !j.Enabled() {
		var set []string
		for _, k := range jwtKeys {
			if env(k, "") != "" {
				set = append(set, k)
			}
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s set without FXDESK_JWT_JWKS_URL: set the host's key set URL to accept host tokens, or unset them", strings.Join(set, ", ")))
		}
		return j, errs
	}
	j.Issuer = env("FXDESK_JWT_ISSUER", "")
	j.Audience = env("FXDESK_JWT_AUDIENCE", "")
	j.UserClaim = env("FXDESK_JWT_USER_CLAIM", auth.DefaultJWTUserClaim)
	j.ScopeClaim = env("FXDESK_JWT_SCOPE_CLAIM", auth.DefaultJWTScopeClaim)
	j.Leeway = duration("FXDESK_JWT_LEEWAY", auth.DefaultJWTLeeway.String())
	j.Refresh = duration("FXDESK_JWT_REFRESH", auth.DefaultJWKSRefresh.String())
	if err := j.Check(); err != nil {
		errs = append(errs, err)
	}
	return j, errs
}
