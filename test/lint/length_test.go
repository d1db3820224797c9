// Package lint holds checks of the code itself that the compiler and go vet do not make.
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a function under functions/ and shared/ may be, from `func` to its
// closing brace (the developers' guide).
const maxLines = 60

func TestFunctionsAreShort(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../functions", "../../shared"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxLines {
					rel, _ := filepath.Rel("../..", path)
					t.Errorf("%s: %s is %d lines, more than %d: split it by concern", rel, fd.Name.Name, n, maxLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
