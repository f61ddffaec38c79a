package fixvenue

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"
)

// An order is counted once per message that carried it: the library's resend keeps the
// message's number, an order sent again has a new one.
func TestOrderRecordsEachMessageThatCarriedItOnce(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.book.order("7", "EURUSD", sideBuy, dec("1000"), "", 5, false)
	s.book.order("7", "EURUSD", sideBuy, dec("1000"), "", 5, true) // the library's resend
	if got := s.State().Orders[0].SeqNums; !slices.Equal(got, []int{5}) {
		t.Fatalf("after a resend: seqNums %v, want [5]", got)
	}
	s.book.order("7", "EURUSD", sideBuy, dec("1000"), "", 9, false) // the same ClOrdID sent again
	if got := s.State().Orders[0].SeqNums; !slices.Equal(got, []int{5, 9}) {
		t.Fatalf("after a second send: seqNums %v, want [5 9]", got)
	}
}

// echoServer answers every line it reads with the same line.
func echoServer(t *testing.T) string {
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
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr and answers whether it came back.
func roundTrip(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// DropFor cuts the live connection and every reconnect until the outage ends; then
// connections pass again.
func TestDropForCutsReconnectsUntilTheOutageEnds(t *testing.T) {
	p, err := listenProxy("127.0.0.1:0", echoServer(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	live, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if !roundTrip(t, p.Addr()) {
		t.Fatal("no round trip through the proxy before the outage")
	}
	if _, err := live.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(live).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.Drop(time.Second)
	live.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := live.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the live connection after the drop: read %v, want EOF", err)
	}
	if _, down := p.down(); !down {
		t.Fatal("down() false right after Drop(1s)")
	}
	if roundTrip(t, p.Addr()) {
		t.Fatal("a connection passed during the outage")
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, down := p.down(); down; _, down = p.down() {
		if time.Now().After(deadline) {
			t.Fatal("the outage never ended")
		}
		time.Sleep(20 * time.Millisecond) // polls the outage's end, a deadline away
	}
	if !roundTrip(t, p.Addr()) {
		t.Fatal("no round trip through the proxy after the outage")
	}
}
