package tcpproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echo serves an echo server on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// HoldConn called from the tap stalls the recognised connection, the chunk that was recognised
// included, while another connection flows; Release delivers what was held, in order.
func TestHoldConnStallsOneConnection(t *testing.T) {
	t.Parallel()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.Tap(func(conn int, b []byte) {
		if bytes.Contains(b, []byte("stall")) {
			p.HoldConn(conn)
		}
	})
	stalled, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	other, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	stalled.Write([]byte("stall me\n"))
	stalled.Write([]byte("and this\n"))
	other.Write([]byte("flows\n"))
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(other).ReadString('\n'); err != nil || line != "flows\n" {
		t.Fatalf("the other connection read %q, %v", line, err)
	}
	// Every chunk the proxy reads is either written on or kept: once the held bytes are all the
	// client sent, none of it reached the server. The proxy announces neither, so poll.
	const sent = "stall me\nand this\n"
	deadline := time.Now().Add(10 * time.Second)
	for held := p.heldText(); held != sent; held = p.heldText() {
		if !strings.HasPrefix(sent, held) {
			t.Fatalf("the proxy holds %q, want a prefix of %q", held, sent)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy holds %q of the stalled connection's %q: the rest reached the server", held, sent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Release()
	stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(io.LimitReader(stalled, int64(len(sent))))
	if err != nil || string(got) != sent {
		t.Fatalf("after Release the held connection read %q, %v", got, err)
	}
}

// heldText is everything the proxy holds, read under its lock (a test holds one connection).
func (p *Proxy) heldText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, held := range p.held {
		b.Write(held)
	}
	return b.String()
}
