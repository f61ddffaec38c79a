package book

import (
	"strings"
	"testing"
)

// Last statements run after every other, in the order added, whatever was appended after them;
// Commit puts them after the lease fence, just before COMMIT.
func TestBatchLastRunsLast(t *testing.T) {
	t.Parallel()
	b := &Batch{}
	b.Exec("A", 1)
	b.Last("L", 2)
	o := &Batch{}
	o.Exec("B", 3)
	o.Last("M", 4)
	b.Append(o)
	b.Exec("C", 5)
	if b.Empty() {
		t.Fatal("a batch with statements is Empty")
	}
	b.flushLast()
	if got, want := b.text.String(), "A;\nB;\nC;\nL;\nM"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	for i, want := range []any{1, 3, 5, 2, 4} {
		if b.args[i] != want {
			t.Fatalf("args %v, want them in statement order", b.args)
		}
	}
	only := &Batch{}
	only.Last("L")
	if only.Empty() {
		t.Fatal("a batch with only a Last statement is Empty")
	}
	if !(&Batch{}).Empty() {
		t.Fatal("a new batch is not Empty")
	}
}

// rowsOf is a Gather of named rows, flushed as one statement "<name>(<rows>)".
type rowsOf struct {
	name string
	rows []string
}

func (g *rowsOf) Merge(o Gather) { g.rows = append(g.rows, o.(*rowsOf).rows...) }
func (g *rowsOf) Flush(b *Batch) { b.Exec(g.name + "(" + strings.Join(g.rows, ",") + ")") }

func gather(b *Batch, last bool, key, row string) {
	get := b.Gathered
	if last {
		get = b.GatheredLast
	}
	g := get(key, func() Gather { return &rowsOf{name: key} }).(*rowsOf)
	g.rows = append(g.rows, row)
}

// A transaction ends with its plain Gathers' statements (the profiles' upsert), then the fence,
// then its Last Gathers' (the events' sequence and INSERT) and Last statements, then COMMIT:
// whatever order the writes asked for them in, a Last Gather is never written before a plain
// one, so the lock it takes is held for the COMMIT alone. Rows of an appended batch join the
// Gather of the same key.
func TestBatchEndingOrder(t *testing.T) {
	t.Parallel()
	b := &Batch{}
	gather(b, true, "events", "e1")
	b.Exec("A")
	gather(b, false, "profiles", "p1")
	b.Last("L")
	o := &Batch{}
	gather(o, true, "events", "e2")
	gather(o, false, "profiles", "p2")
	o.Exec("B")
	b.Append(o)
	b.ending("FENCE", nil)
	if got, want := b.text.String(), "A;\nB;\nprofiles(p1,p2);\nFENCE;\nevents(e1,e2);\nL;\nCOMMIT"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	if len(b.gathers) != 0 || b.last != nil {
		t.Fatalf("%d gathers and last %v left after ending", len(b.gathers), b.last)
	}
}
