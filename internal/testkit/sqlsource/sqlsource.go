// Package sqlsource reads the string texts — the SQL among them — out of the module's non-test
// Go sources, for the tests that check what the desk sends to the database: that it is portable
// (internal/store) and that only the ledger writes money (internal/ledger). It parses the files;
// it does not load or type-check packages.
package sqlsource

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A Text is one maximal string expression of a non-test Go file.
type Text struct {
	File string // path relative to the root, with forward slashes
	Line int
	Text string
	// Builder is set when the enclosing function declares a strings.Builder: then the text may be
	// a fragment of a statement assembled at runtime. It names the function by package directory
	// (not file, as files split): "internal/ledger.Post".
	Builder string
}

// Where is the text's place, file:line.
func (t Text) Where() string { return fmt.Sprintf("%s:%d", t.File, t.Line) }

// Texts returns every string text in the non-test Go files under root (directories starting
// with ".", testdata and vendor are skipped), sorted by place, and how many files it read.
//
// Within one Go expression, string literals and string constants joined by + are folded into
// one text (constants resolved by name in their own package, or through a package selector,
// package-level variables with an initialiser alike); any other operand (a call such as
// marks(n), a variable) becomes ?, as the dynamic parts are value lists. Operands that are not
// part of the chain (a call's arguments) are read as texts of their own. Package-level constant
// declarations are read where they are used, not where they are declared.
func Texts(root string) (texts []Text, files int, err error) {
	fset := token.NewFileSet()
	pkgs := map[string]*goPackage{} // by directory
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		p := pkgs[filepath.Dir(path)]
		if p == nil {
			p = &goPackage{consts: map[string]ast.Expr{}}
			pkgs[filepath.Dir(path)] = p
		}
		p.files = append(p.files, f)
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && (g.Tok == token.CONST || g.Tok == token.VAR) {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							p.consts[name.Name] = vs.Values[i]
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	// Selectors name packages by their package name; a name two packages share is not resolved.
	byName := map[string]*goPackage{}
	seen := map[string]int{}
	for _, p := range pkgs {
		seen[p.files[0].Name.Name]++
	}
	for _, p := range pkgs {
		if name := p.files[0].Name.Name; seen[name] == 1 {
			byName[name] = p
		}
	}

	for _, p := range pkgs {
		p.byName = byName
		for _, f := range p.files {
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
					continue // constants are read where they are used
				}
				builder := ""
				if fn, ok := decl.(*ast.FuncDecl); ok && declaresBuilder(fn) {
					builder = fn.Name.Name
				}
				for _, t := range p.textsIn(decl) {
					pos := fset.Position(t.pos)
					rel, err := filepath.Rel(root, pos.Filename)
					if err != nil {
						return nil, 0, err
					}
					rel = filepath.ToSlash(rel)
					out := Text{File: rel, Line: pos.Line, Text: t.text}
					if builder != "" {
						out.Builder = filepath.ToSlash(filepath.Dir(rel)) + "." + builder
					}
					texts = append(texts, out)
				}
			}
		}
	}
	slices.SortFunc(texts, func(a, b Text) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return texts, files, nil
}

type goPackage struct {
	files  []*ast.File
	consts map[string]ast.Expr   // package-level constants and variables with an initialiser
	byName map[string]*goPackage // every package, by package name
}

type posText struct {
	pos  token.Pos
	text string
}

// textsIn returns each maximal string expression in one declaration, folded.
func (p *goPackage) textsIn(decl ast.Decl) []posText {
	var out []posText
	read := map[ast.Node]bool{} // parts of a chain already folded with it
	ast.Inspect(decl, func(n ast.Node) bool {
		if n == nil || read[n] {
			return true
		}
		switch e := n.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return true
			}
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return true
			}
		case *ast.ValueSpec:
			for _, name := range e.Names {
				read[name] = true // the name declared, not a use of it
			}
			return true
		case *ast.SelectorExpr:
			read[e.Sel] = true // a field or method name, not a constant of this package
		case *ast.Ident:
		default:
			return true
		}
		text, isString := p.fold(n.(ast.Expr), 0, read)
		if isString {
			out = append(out, posText{n.Pos(), text})
		}
		return true
	})
	return out
}

// fold returns the text of a string expression, and whether any part of it was a string. The
// nodes it folds into the text are marked in read.
func (p *goPackage) fold(e ast.Expr, depth int, read map[ast.Node]bool) (string, bool) {
	if depth > 20 {
		return "?", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			if err == nil {
				read[e] = true
			}
			return s, err == nil
		}
	case *ast.ParenExpr:
		read[e] = true
		return p.fold(e.X, depth+1, read)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			read[e] = true
			l, lok := p.fold(e.X, depth+1, read)
			r, rok := p.fold(e.Y, depth+1, read)
			return l + r, lok || rok
		}
	case *ast.Ident:
		if v, ok := p.consts[e.Name]; ok {
			read[e] = true
			return p.fold(v, depth+1, map[ast.Node]bool{})
		}
	case *ast.CallExpr:
		// store.ValuesRows(n, cols) is a multi-row INSERT's rows of markers: one row stands for them.
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "ValuesRows" {
			return "(?)", false
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			if q := p.byName[x.Name]; q != nil {
				if v, ok := q.consts[e.Sel.Name]; ok {
					read[e], read[x], read[e.Sel] = true, true, true
					return q.fold(v, depth+1, map[ast.Node]bool{})
				}
			}
		}
	}
	return "?", false
}

// declaresBuilder reports whether fn declares a strings.Builder.
func declaresBuilder(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "strings" && sel.Sel.Name == "Builder" {
				found = true
			}
		}
		return !found
	})
	return found
}

// ModuleTexts is Texts over the module a test runs in, found from the test's package directory
// (two levels below the root, as internal/<pkg> is); it fails the test when the walk cannot be
// trusted — no go.mod there, or too few files read to be the whole module.
func ModuleTexts(t testing.TB) []Text {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	texts, files, err := Texts(root)
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("checked only %d source files under %s: the walk is not seeing the module", files, root)
	}
	return texts
}

// WritesTable matches any statement that writes table: INSERT or REPLACE into it, UPDATE of it,
// DELETE from it, TRUNCATE of it, LOAD DATA into it. The one-writer tests use it to find every
// writer.
func WritesTable(table string) *regexp.Regexp {
	t := regexp.QuoteMeta(table)
	return regexp.MustCompile("(?is)\\b(?:INSERT|REPLACE)\\b(?:\\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\\s+INTO)?\\s+(?:`?\\w+`?\\.)?`?" + t + "`?\\b" +
		"|\\bUPDATE\\b[^;]*?\\b" + t + "\\b[^;]*?\\bSET\\b|\\bDELETE\\b[^;]*?\\bFROM\\b[^;]*?\\b" + t + "\\b|\\bTRUNCATE\\b[^;]*?\\b" + t + "\\b" +
		"|\\bLOAD\\s+(?:DATA|XML)\\b[^;]*?\\bINTO\\s+TABLE\\s+(?:`?\\w+`?\\.)?`?" + t + "`?\\b")
}
