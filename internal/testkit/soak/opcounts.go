package soak

import (
	"fmt"
	"strings"
	"sync"
)

// opCounts counts a lane's requests by kind, safe for the lane's goroutines, and shows them as
// the summary line does: kind:n for every kind, in the lane's order.
type opCounts struct {
	kinds []string
	mu    sync.Mutex
	n     map[string]int
}

func newOpCounts(kinds []string) *opCounts { return &opCounts{kinds: kinds, n: map[string]int{}} }

func (c *opCounts) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[kind]++
}

func (c *opCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.kinds))
	for i, k := range c.kinds {
		out[i] = fmt.Sprintf("%s:%d", k, c.n[k])
	}
	return strings.Join(out, ",")
}
