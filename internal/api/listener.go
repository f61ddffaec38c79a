package api

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LimitListener caps the connections a process keeps open at max. A connection past the cap is
// accepted only to be told so — a 503 with Retry-After, written at once — and closed, so the
// process never runs out of descriptors and a client learns why instead of hanging in the
// kernel's backlog (golang.org/x/net/netutil's LimitListener waits instead, which is the hang).
// refused is called for each one turned away.
func LimitListener(ln net.Listener, max int, refused func()) net.Listener {
	return &limitListener{Listener: ln, max: int64(max), refused: refused}
}

type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func()
}

// connRefusal is the whole answer to a connection past the cap.
var connRefusal = func() []byte {
	body := `{"error":{"code":"unavailable","message":"This server has its most open connections; retry shortly (keep-alive connections are reused)."}}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			// The refusal fits any socket buffer; the deadline only guards a peer that
			// announced a zero window.
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write(connRefusal)
			c.Close()
			if l.refused != nil {
				l.refused()
			}
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// Open is the number of connections the listener holds open.
func (l *limitListener) Open() int64 { return l.open.Load() }

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
