package fixvenue

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// proxy forwards every connection it accepts to the acceptor and can cut them all at once: the
// "session dropped" fault is a real TCP cut, not a logout.
type proxy struct {
	ln     net.Listener
	target string
	log    *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// downUntil: until then every connection is closed as soon as it is accepted (a network
	// outage the initiator's reconnects run into).
	downUntil time.Time
	accepted  int64 // connections accepted since it started
	wg        sync.WaitGroup
}

func listenProxy(addr, target string, log *slog.Logger) (*proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fixvenue: listen %s: %w", addr, err)
	}
	p := &proxy{ln: ln, target: target, log: log, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// down is the end of the outage Drop began, if it lasts still.
func (p *proxy) down() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.downUntil, time.Now().Before(p.downUntil)
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Warn("fixvenue: accept", slog.Any("err", err))
			}
			return
		}
		p.mu.Lock()
		down := time.Now().Before(p.downUntil)
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.log.Warn("fixvenue: dial the acceptor", slog.Any("err", err))
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies one direction; when either side ends, both close.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Accepted is how many connections the desk has opened to the venue since it started.
func (p *proxy) Accepted() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Drop closes every proxied connection and answers how many pairs it cut; for d after, every
// new connection is cut as soon as it is accepted.
func (p *proxy) Drop(d time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d > 0 {
		p.downUntil = time.Now().Add(d)
	}
	for c := range p.conns {
		_ = c.Close()
	}
	n := len(p.conns) / 2
	clear(p.conns)
	return n
}

func (p *proxy) Close() {
	_ = p.ln.Close()
	p.Drop(0)
	p.wg.Wait()
}
