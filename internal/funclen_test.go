package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function (or function literal) outside
// tests may be, counted from its signature to its closing brace: past it
// a function does several things, and the next change to one of them has
// to read them all.
const maxFuncLines = 80

// upstreamCopies are directories of code copied from another project and
// kept as it was written there, so that the diff against the original
// stays small enough to review: the rule is ours, not theirs.
var upstreamCopies = map[string]bool{
	filepath.Join("..", "internal", "argon2"): true, // golang.org/x/crypto/argon2
}

func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || upstreamCopies[path]) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			name := "func literal"
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body, name = fn.Body, fn.Name.Name
			case *ast.FuncLit:
				body = fn.Body
			}
			if body == nil {
				return true
			}
			if lines := fset.Position(body.Rbrace).Line - fset.Position(n.Pos()).Line + 1; lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", fset.Position(n.Pos()), name, lines, maxFuncLines)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files checked: the walk missed the module", checked)
	}
}
