package tcpproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
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
	stalled.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := stalled.Read(make([]byte, 64)); n != 0 {
		t.Fatal("the held connection's bytes reached the server")
	}
	p.Release()
	stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(io.LimitReader(stalled, int64(len("stall me\nand this\n"))))
	if err != nil || string(got) != "stall me\nand this\n" {
		t.Fatalf("after Release the held connection read %q, %v", got, err)
	}
}
