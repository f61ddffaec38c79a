// Package tcpproxy is a small loopback TCP proxy for fault tests: it forwards connections to a
// real server and can cut them, so tests break real connections instead of mocking drivers.
package tcpproxy

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards every accepted connection to Target while it is up.
type Proxy struct {
	Target string

	ln    net.Listener
	mu    sync.Mutex
	down  bool
	conns map[int]net.Conn
	next  int
	tap   atomic.Pointer[func(conn int, clientBytes []byte)]
	wg    sync.WaitGroup
	// held, while holding (every connection, or those in heldConns), keeps what clients sent,
	// per upstream connection and in order.
	holding   bool
	heldConns map[int]bool
	held      map[net.Conn][]byte
	// losing names the server-to-client pipes whose bytes are dropped (LoseReplies), by the
	// pipe's own number (the connection's as Tap numbers it, plus one).
	losing map[int]bool
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: target, ln: ln, conns: map[int]net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Tap calls fn with every chunk a client sends, tagged with the connection's number. fn runs on
// the forwarding goroutine and must be quick.
func (p *Proxy) Tap(fn func(conn int, clientBytes []byte)) {
	p.tap.Store(&fn)
}

// Cut closes every open connection and refuses new ones (they are accepted and closed at once,
// as a dead peer behind a firewall that resets would look) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.down = true
	for id, c := range p.conns {
		c.Close()
		delete(p.conns, id)
	}
	p.mu.Unlock()
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Hold stops delivering what clients send (answers still flow back) and keeps it, in order, until
// Release: a request that left its client reaches the server late, as after a stalled network
// or a peer paused between writing a request and the server reading it.
func (p *Proxy) Hold() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// HoldConn is Hold for one connection, numbered as Tap numbers it: from now on what its client
// sends is kept until Release while every other connection flows. Called from a Tap function, it
// holds the chunk being tapped too, so a test can stall exactly one request on its way: the one
// whose bytes it recognises.
func (p *Proxy) HoldConn(conn int) {
	p.mu.Lock()
	if p.heldConns == nil {
		p.heldConns = map[int]bool{}
	}
	p.heldConns[conn] = true
	p.mu.Unlock()
}

// Release delivers everything held, connection by connection in the order it was sent, and
// forwards again.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for dst, b := range p.held {
		dst.Write(b)
	}
	p.held, p.holding, p.heldConns = nil, false, nil
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.Target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		id := p.next
		p.next += 2
		p.conns[id], p.conns[id+1] = c, up
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c, id, true)
		go p.pipe(c, up, id+1, false)
	}
}

func (p *Proxy) pipe(dst, src net.Conn, id int, fromClient bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if tap := p.tap.Load(); fromClient && tap != nil {
				(*tap)(id, buf[:n])
			}
			if fromClient && p.keep(id, dst, buf[:n]) {
				continue
			}
			if !fromClient && p.lost(id) {
				continue
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// keep holds b, sent on connection id, for dst while the proxy holds it. Release writes under the
// same lock, so nothing a connection sends after Release overtakes what was held.
func (p *Proxy) keep(id int, dst net.Conn, b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holding && !p.heldConns[id] {
		return false
	}
	if p.held == nil {
		p.held = map[net.Conn][]byte{}
	}
	p.held[dst] = append(p.held[dst], b...)
	return true
}

// MySQLQueries returns a tap that reassembles the MySQL client protocol per connection and calls
// fn with the text of every COM_QUERY the client sends (the desk sends every statement as text:
// its DSN sets interpolateParams). It is how tests count statements on the wire.
func MySQLQueries(fn func(query string)) func(conn int, clientBytes []byte) {
	return MySQLConnQueries(func(_ int, query string) { fn(query) })
}

// MySQLConnQueries is MySQLQueries with the connection each query was sent on, for a tap that
// acts on that connection (LoseReply).
func MySQLConnQueries(fn func(conn int, query string)) func(conn int, clientBytes []byte) {
	var mu sync.Mutex
	pending := map[int][]byte{}
	return func(conn int, b []byte) {
		mu.Lock()
		defer mu.Unlock()
		buf := append(pending[conn], b...)
		for len(buf) >= 4 {
			size := int(binary.LittleEndian.Uint32(append(buf[:3:3], 0)))
			if len(buf) < 4+size {
				break
			}
			seq, payload := buf[3], buf[4:4+size]
			// A command starts a new sequence at 0; handshake packets do not.
			if seq == 0 && size > 0 && payload[0] == 0x03 {
				fn(conn, string(payload[1:]))
			}
			buf = buf[4+size:]
		}
		pending[conn] = append([]byte(nil), buf...)
	}
}
