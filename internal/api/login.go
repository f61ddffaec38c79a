package api

import (
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

// The operator's pages (/admin/…) are for a browser, which cannot send a bearer header: the
// admin signs in once through a form, and a cookie carries the token from then on. A token is
// never taken in a URL, where access logs (the proxy's included) and browser history keep it.

// statusCookie carries the admin token for the operator's pages, so a browser can refresh them.
const statusCookie = "fxdesk_admin"

// pageCSP lets the pages style themselves and post their forms to this origin, nothing else: no
// script, no external asset, no framing by another site.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"

// loginFormBytes bounds the sign-in form's body: a token and little else.
const loginFormBytes = 4 << 10

//go:embed login.html
var loginFS embed.FS

var loginPage = template.Must(template.ParseFS(loginFS, "login.html"))

// operatorPages mounts the browser's pages: the sign-in form, sign-out and the status page.
// authn is the API's bearer-token check (with its rate limit), which the cookie feeds.
func operatorPages(r chi.Router, log *slog.Logger, res *auth.Resolver, authn func(http.Handler) http.Handler, guard guardSet, status http.Handler) {
	csrf := http.NewCrossOriginProtection()
	r.Route("/admin", func(r chi.Router) {
		r.Use(noTokenInURL(log))
		r.Get("/login", func(w http.ResponseWriter, r *http.Request) { writeLoginPage(r, log, w, http.StatusOK, "") })
		r.Post("/login", handleLogin(log, res, csrf))
		r.Post("/logout", handleLogout(log, csrf))
		guard.permit(r.With(pageCookie, authn), log, auth.PermRead).Method(http.MethodGet, "/status", status)
	})
}

// noTokenInURL refuses ?token= on every operator page, the sign-in form included: it is how
// these pages once signed in, and honouring it would keep tokens in logs. The answer says where
// to sign in instead and never repeats the token.
func noTokenInURL(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("token") {
				writeLoginPage(r, log, w, http.StatusBadRequest,
					"A token in a URL is not accepted: URLs are written to access logs and browser history, so that token should now be revoked and replaced. Sign in with this form instead.")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// pageCookie lets the cookie set by the sign-in form stand in for the Authorization header, and
// sends a browser that has neither to the form.
func pageCookie(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			c, err := r.Cookie(statusCookie)
			if err != nil || c.Value == "" {
				http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
				return
			}
			r.Header.Set("Authorization", "Bearer "+c.Value)
		}
		next.ServeHTTP(w, r)
	})
}

// handleLogin checks the admin token posted by the form and, when it is a live admin token,
// keeps it in an HttpOnly, SameSite=Strict cookie (Secure over TLS) and sends the browser to the
// status page. A post from another site is refused before the token is read: SameSite keeps the
// cookie from being sent cross-site, and this check keeps another site from signing a browser in
// with a token of its choosing.
func handleLogin(log *slog.Logger, res *auth.Resolver, csrf *http.CrossOriginProtection) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := csrf.Check(r); err != nil {
			writeLoginPage(r, log, w, http.StatusForbidden, "This form signs in only from the desk's own page: open /admin/login on this server.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, loginFormBytes)
		if err := r.ParseForm(); err != nil {
			status := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status = http.StatusRequestEntityTooLarge
			}
			writeLoginPage(r, log, w, status, "The form could not be read: post it from this page.")
			return
		}
		tok := strings.TrimSpace(r.PostForm.Get("token"))
		if tok == "" {
			writeLoginPage(r, log, w, http.StatusBadRequest, "Enter an admin token (issued by `fxdesk-web token create --user ID --admin`).")
			return
		}
		p, err := res.Resolve(r.Context(), "Bearer "+tok)
		switch {
		case fx.ErrorCode(err) == fx.EUNAUTH:
			writeLoginPage(r, log, w, http.StatusUnauthorized, "That is not a live token: check it, or issue one with `fxdesk-web token create --user ID --admin`.")
			return
		case err != nil:
			log.WarnContext(r.Context(), "sign-in not checked", slog.Any("err", err))
			writeLoginPage(r, log, w, http.StatusServiceUnavailable, "The token could not be checked (the database did not answer): try again in a moment.")
			return
		case !p.Staff():
			writeLoginPage(r, log, w, http.StatusForbidden, "That token is a trader's: the status page needs a staff token (any role but trader).")
			return
		}
		http.SetCookie(w, pageSession(r, tok, 0))
		http.Redirect(w, r, "/admin/status", http.StatusSeeOther)
	}
}

// handleLogout forgets the cookie and returns to the form.
func handleLogout(log *slog.Logger, csrf *http.CrossOriginProtection) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := csrf.Check(r); err != nil {
			writeLoginPage(r, log, w, http.StatusForbidden, "This form signs out only from the desk's own page.")
			return
		}
		http.SetCookie(w, pageSession(r, "", -1))
		http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
	}
}

// pageSession is the cookie that carries tok for the operator's pages (maxAge -1 deletes it). It
// is Secure when the browser reached the desk over TLS, directly or through a proxy that says so;
// a client that claims TLS falsely only keeps its own browser from sending the cookie back.
func pageSession(r *http.Request, tok string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: statusCookie, Value: tok, Path: "/admin/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")}
}

// writeLoginPage answers the sign-in form, with problem above it when there is one.
func writeLoginPage(r *http.Request, log *slog.Logger, w http.ResponseWriter, status int, problem string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.WriteHeader(status)
	if err := loginPage.Execute(w, problem); err != nil {
		log.WarnContext(r.Context(), "sign-in page not rendered", slog.Any("err", err))
	}
}
