package store

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"testing"

	"fxdesk/migrations"
)

// Migrations are split on ";" at the end of a line; comments and blank lines are dropped, and a
// ";" inside a line (a JSON default, a string) does not split.
func TestMigrationsSplitOnlyAtLineEndSemicolons(t *testing.T) {
	got := statements("-- a comment\nCREATE TABLE a (\n  x TEXT -- inline\n);\n\nINSERT INTO a VALUES ('[{\"k\":1};x]');\nUPDATE a SET x = 'y'")
	want := []string{
		"CREATE TABLE a (\n  x TEXT -- inline\n)",
		"INSERT INTO a VALUES ('[{\"k\":1};x]')",
		"UPDATE a SET x = 'y'",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("statements =\n%q\nwant\n%q", got, want)
	}
}

// Every embedded migration is numbered, unique and has a down file.
func TestMigrationsAreWellFormed(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 5 {
		t.Fatalf("%d migrations", len(ms))
	}
	for i, m := range ms {
		if m.version != int64(i+1) {
			t.Errorf("migration %d has version %d: numbering has a gap", i, m.version)
		}
		if len(statements(m.up)) == 0 {
			t.Errorf("migration %06d_%s has no statement", m.version, m.name)
		}
		if _, err := fs.Stat(migrations.FS, fmt.Sprintf("%06d_%s.down.sql", m.version, m.name)); err != nil {
			t.Errorf("migration %06d_%s has no down file", m.version, m.name)
		}
	}
}

// A migration failure is never mistaken for a server that cannot be reached, whatever its
// cause: the web process would otherwise boot without its schema.
func TestMigrateFailureIsNotUnreachable(t *testing.T) {
	lockHeld := fmt.Errorf("%w: %w", ErrMigrate, errors.New("another process held the migration lock for 60s"))
	if Unreachable(lockHeld) {
		t.Fatalf("Unreachable(%v) = true", lockHeld)
	}
	if down := errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"); !Unreachable(down) {
		t.Fatalf("Unreachable(%v) = false", down)
	}
}
