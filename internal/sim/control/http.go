package control

import (
	"encoding/json"
	"net"
	"net/http"
)

// maxBody bounds a control request's body.
const maxBody = 1 << 20

// LoopbackOnly refuses calls from anywhere but this machine (403 EFORBIDDEN), even if someone
// binds a simulator's control listener to a public address.
func LoopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		if err != nil || ip == nil || !ip.IsLoopback() {
			WriteError(w, http.StatusForbidden, "EFORBIDDEN", "the simulator control API answers loopback callers only")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// DecodeBody reads r's JSON body into v, refusing unknown fields so that a misspelt control
// field is an error, not a silent default. On failure it has answered 400 EINVALID and returns
// false.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		WriteError(w, http.StatusBadRequest, "EINVALID", "decode request body: "+err.Error())
		return false
	}
	return true
}

// WriteError answers {"error":{"code":code,"message":msg}} with status.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An encode error here means the caller hung up; there is nobody left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
