package book

import "testing"

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
