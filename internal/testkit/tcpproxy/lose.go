package tcpproxy

import "time"

// LoseReplies drops everything the server sends on connection conn (numbered as Tap numbers it)
// from now on, and cuts that connection after d: what the client sent reaches the server and is
// carried out, and the client never learns it — a COMMIT that succeeded, seen by its client as
// a connection that went silent and then broke. Called from a Tap function, it takes effect
// before the chunk being tapped reaches the server, so the answer to that very request is lost.
func (p *Proxy) LoseReplies(conn int, d time.Duration) {
	p.mu.Lock()
	if p.losing == nil {
		p.losing = map[int]bool{}
	}
	p.losing[conn+1] = true
	p.mu.Unlock()
	time.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, id := range []int{conn, conn + 1} {
			if c, ok := p.conns[id]; ok {
				c.Close()
				delete(p.conns, id)
			}
		}
		delete(p.losing, conn+1)
	})
}

// LoseReply drops what the server answers on connection conn and cuts it at once: called from a
// Tap function, the request being tapped reaches the server and is carried out, and its reply
// never reaches the client — a COMMIT that succeeded with its reply lost.
func (p *Proxy) LoseReply(conn int) { p.LoseReplies(conn, 0) }

// lost reports whether what the server sends on pipe id is being dropped.
func (p *Proxy) lost(id int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.losing[id]
}
