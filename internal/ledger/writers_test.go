package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// writesMoney reports whether SQL text writes the ledger: any INSERT, REPLACE, UPDATE or DELETE
// on fx_deal, or an UPDATE of fx_account that assigns its balance or its balanceVersion (the
// version the risk engine follows balances by moves only with the balance).
func writesMoney(sqlText string) bool {
	for _, m := range dealWrite.FindAllString(sqlText, -1) {
		if m != "" {
			return true
		}
	}
	for _, m := range accountUpdate.FindAllStringSubmatch(sqlText, -1) {
		if strings.Contains(strings.ToLower(m[1]), "fx_account") && balanceSet.MatchString(m[2]) {
			return true
		}
	}
	return false
}

var (
	dealWrite     = regexp.MustCompile("(?is)\\b(?:INSERT|REPLACE)\\b(?:\\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\\s+INTO)?\\s+(?:`?\\w+`?\\.)?`?fx_deal`?\\b|\\bUPDATE\\b[^;]*?\\bfx_deal\\b[^;]*?\\bSET\\b|\\bDELETE\\b[^;]*?\\bFROM\\b[^;]*?\\bfx_deal\\b")
	accountUpdate = regexp.MustCompile(`(?is)\bUPDATE\b([^;]*?)\bSET\b(.*?)(?:\bWHERE\b|;|$)`)
	balanceSet    = regexp.MustCompile("(?is)(?:^|,)\\s*(?:`?\\w+`?\\.)?`?balance(?:Version)?`?\\s*=")
)

// The detector is a test that can fail: it must see each way of writing the ledger, and nothing
// else.
func TestWritesMoneyDetector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"INSERT INTO `fx_deal` (`accountId`) VALUES (?)", true},
		{"insert ignore into fx_deal (a) values (1)", true},
		{"REPLACE INTO `fxdesk`.`fx_deal` VALUES (?)", true},
		{"UPDATE `fx_deal` SET `amount` = 0", true},
		{"DELETE FROM `fx_deal` WHERE `id` = ?", true},
		{"UPDATE `fx_account` SET `balance` = ? WHERE `id` = ?", true},
		{"UPDATE fx_account SET equity = ?, balance = balance + ? WHERE id = ?", true},
		{"UPDATE `fx_account` a JOIN `fx_position` p ON p.`accountId` = a.`id` SET a.`balance` = 0", true},
		{"UPDATE `fx_account` SET `equity` = ?, `usedMargin` = ?, `markedAt` = NOW(3) WHERE `id` = ?", false},
		{"UPDATE `fx_account` SET `equity` = `balance` + ? WHERE `id` = ?", false},
		{"UPDATE `fx_account` SET `balanceVersion` = `balanceVersion` + 1 WHERE `id` = ?", true},
		{"UPDATE `fx_account` SET `equity` = ?, `balanceVersion` = 0 WHERE `id` = ?", true},
		{"SELECT `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", false},
		{"SELECT SUM(`amount`) FROM `fx_deal` WHERE `accountId` = ?", false},
		{"INSERT INTO `fx_deal_archive` (`id`) VALUES (?)", false},
		{"UPDATE `fx_position` SET `swap` = `swap` + ? WHERE `id` = ?", false},
	} {
		if got := writesMoney(c.sql); got != c.want {
			t.Errorf("writesMoney(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// Nothing but this package writes fx_deal or fx_account.balance (DESIGN §4, one ledger writer).
// Every non-test Go source of the module is parsed; each string constant — literals, with the
// literal parts of a + concatenation joined (other operands read as a placeholder) — is checked.
func TestOnlyTheLedgerWritesMoney(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	self := filepath.Join(root, "internal", "ledger")
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == self {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, s := range sqlStrings(f) {
			if writesMoney(s.text) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d writes the ledger outside internal/ledger (post through ledger.Post): %s", rel, fset.Position(s.pos).Line, s.text)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("checked only %d source files under %s: the walk is not seeing the module", files, root)
	}
}

type sqlString struct {
	pos  token.Pos
	text string
}

// sqlStrings returns every maximal string expression of f: a lone literal, or a + chain whose
// literal operands are joined in order with " ? " for the others.
func sqlStrings(f *ast.File) []sqlString {
	var out []sqlString
	read := map[ast.Node]bool{} // parts of a chain already read with it
	ast.Inspect(f, func(n ast.Node) bool {
		if read[n] {
			return true
		}
		switch e := n.(type) {
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return true
			}
			var sb strings.Builder
			lits := 0
			var walk func(ast.Expr)
			walk = func(x ast.Expr) {
				switch v := x.(type) {
				case *ast.BinaryExpr:
					if v.Op == token.ADD {
						read[v] = true
						walk(v.X)
						walk(v.Y)
						return
					}
				case *ast.ParenExpr:
					walk(v.X)
					return
				case *ast.BasicLit:
					if v.Kind == token.STRING {
						if s, err := strconv.Unquote(v.Value); err == nil {
							read[v] = true
							sb.WriteString(s)
							lits++
							return
						}
					}
				}
				sb.WriteString(" ? ")
			}
			walk(e)
			if lits > 0 {
				out = append(out, sqlString{e.Pos(), sb.String()})
			}
			return true // operands that are not part of the chain (a call's arguments) are read on their own
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				if s, err := strconv.Unquote(e.Value); err == nil {
					out = append(out, sqlString{e.Pos(), s})
				}
			}
		}
		return true
	})
	return out
}
