package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestNoUnusedDeclarations is a small stand-in for staticcheck's U1000,
// for `go test` without a download: every unexported top-level function,
// constant, variable and type of the module is named somewhere besides its
// own declaration, in a file of its directory (tests count). ./build.sh
// test runs staticcheck itself, pinned (STATICCHECK in build.sh):
//
//	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
func TestNoUnusedDeclarations(t *testing.T) {
	dirs := map[string][]string{}
	filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	var unused []string
	for _, files := range dirs {
		fset := token.NewFileSet()
		declared := map[*ast.Ident]bool{} // the declaring identifiers
		uses := map[string]int{}          // every identifier by name
		var candidates []*ast.Ident
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			test := strings.HasSuffix(f, "_test.go")
			for _, d := range af.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					declared[d.Name] = true
					if !test && d.Recv == nil && !ast.IsExported(d.Name.Name) && d.Name.Name != "main" && d.Name.Name != "init" {
						candidates = append(candidates, d.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						var names []*ast.Ident
						switch s := s.(type) {
						case *ast.ValueSpec:
							names = s.Names
						case *ast.TypeSpec:
							names = []*ast.Ident{s.Name}
						}
						for _, n := range names {
							declared[n] = true
							if !test && n.Name != "_" && !ast.IsExported(n.Name) {
								candidates = append(candidates, n)
							}
						}
					}
				}
			}
			ast.Inspect(af, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && !declared[id] {
					uses[id.Name]++
				}
				return true
			})
		}
		for _, id := range candidates {
			if uses[id.Name] == 0 {
				unused = append(unused, fset.Position(id.Pos()).String()+": "+id.Name)
			}
		}
	}
	sort.Strings(unused)
	for _, u := range unused {
		t.Errorf("%s is never used", u)
	}
}
