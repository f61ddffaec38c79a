package tcpproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// LoseReplies called from the tap when a client sends "commit": the server receives the line and
// answers it, the client reads nothing of the answer and then a broken connection, while another
// connection's answers flow.
func TestLoseRepliesDeliversTheRequestAndDropsItsAnswerThenCuts(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	received := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					line, err := rd.ReadString('\n')
					if err != nil {
						return
					}
					received <- line
					c.Write([]byte("ok " + line))
				}
			}()
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const lose = 300 * time.Millisecond
	p.Tap(func(conn int, b []byte) {
		if bytes.HasPrefix(b, []byte("commit")) {
			p.LoseReplies(conn, lose)
		}
	})
	lost, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer lost.Close()
	other, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	sent := time.Now()
	lost.Write([]byte("commit\n"))
	if got := <-received; got != "commit\n" {
		t.Fatalf("the server received %q, want the commit", got)
	}
	other.Write([]byte("flows\n"))
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(other).ReadString('\n'); err != nil || line != "ok flows\n" {
		t.Fatalf("the other connection read %q, %v", line, err)
	}
	lost.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(lost)
	if len(got) > 0 {
		t.Fatalf("the client read %q: the answer to its commit reached it", got)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection was never cut: %v", err)
	}
	if took := time.Since(sent); took < lose {
		t.Fatalf("the connection ended %s after the commit, before the %s the answer is lost for", took, lose)
	}
}
