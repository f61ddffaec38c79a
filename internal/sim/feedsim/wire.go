package feedsim

import (
	"encoding/json"
	"strconv"
	"strings"
)

type statusEvent struct {
	Status  string
	Message string
}

// statusFrame encodes one frame of status events. Status traffic is rare, so encoding/json is
// fine here; quotes use appendQuote.
func statusFrame(events ...statusEvent) []byte {
	type wire struct {
		Ev      string `json:"ev"`
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	out := make([]wire, len(events))
	for i, e := range events {
		out[i] = wire{Ev: "status", Status: e.Status, Message: e.Message}
	}
	b, _ := json.Marshal(out) // strings only; cannot fail
	return b
}

// appendQuote appends one quote event. Hand-written because bursts encode hundreds of thousands
// of events a second; pair is a wire pair from the simulator's own table, so it needs no escaping.
func appendQuote(b []byte, pair string, bid, ask float64, ms int64, digits int) []byte {
	b = append(b, `{"ev":"C","p":"`...)
	b = append(b, pair...)
	b = append(b, `","x":48,"a":`...)
	b = strconv.AppendFloat(b, ask, 'f', digits, 64)
	b = append(b, `,"b":`...)
	b = strconv.AppendFloat(b, bid, 'f', digits, 64)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, ms, 10)
	return append(b, '}')
}

type clientAction struct {
	Action string `json:"action"`
	Params string `json:"params"`
}

// handleAction answers one client message: auth, subscribe or unsubscribe.
func (s *Server) handleAction(c *client, msg []byte) {
	var a clientAction
	if err := json.Unmarshal(msg, &a); err != nil {
		c.enqueue(statusFrame(statusEvent{"error", "invalid message"}), true)
		return
	}
	switch a.Action {
	case "auth":
		if key := strings.TrimSpace(a.Params); key == "" || (s.cfg.Key != "" && key != s.cfg.Key) {
			c.enqueue(statusFrame(statusEvent{"auth_failed", "authentication failed"}), true)
			return
		}
		s.mu.Lock()
		c.authed = true
		s.mu.Unlock()
		c.enqueue(statusFrame(statusEvent{"auth_success", "authenticated"}), true)
	case "subscribe", "unsubscribe":
		subscribe := a.Action == "subscribe"
		var replies []statusEvent
		s.mu.Lock()
		if !c.authed {
			s.mu.Unlock()
			c.enqueue(statusFrame(statusEvent{"error", "not authorized"}), true)
			return
		}
		var closed []statusEvent
		for _, p := range strings.Split(a.Params, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			pair, ok := strings.CutPrefix(p, "C.")
			if !ok || pair == "" {
				replies = append(replies, statusEvent{"error", "unsupported channel: " + p})
				continue
			}
			switch {
			case pair == "*":
				c.all = subscribe
			case subscribe:
				c.subs[pair] = true
			default:
				delete(c.subs, pair)
			}
			if subscribe {
				replies = append(replies, statusEvent{"success", "subscribed to: " + p})
				// A late subscriber must learn that a pair is closed, as it would from a real
				// provider's session status.
				for _, st := range s.order {
					if st.providerClosed && (pair == "*" || pair == st.pair) {
						closed = append(closed, statusEvent{"market_closed", st.pair})
					}
				}
			} else {
				replies = append(replies, statusEvent{"success", "unsubscribed to: " + p})
			}
		}
		s.mu.Unlock()
		if len(replies) > 0 {
			c.enqueue(statusFrame(replies...), true)
		}
		if len(closed) > 0 {
			c.enqueue(statusFrame(closed...), true)
		}
	default:
		c.enqueue(statusFrame(statusEvent{"error", "unknown action: " + a.Action}), true)
	}
}
