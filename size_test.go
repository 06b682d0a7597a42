package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Limits the layout holds to (issue 17): a source file is at most about
// maxFileLines lines and a function at most about maxFuncLines, unless a
// comment says why it is longer. A function's reason is a line "long: WHY"
// in its doc comment; a file's, a comment line "// long: WHY" before its
// first declaration. Tests are not held to them (a table of cases is as
// long as its cases).
const (
	maxFileLines = 500
	maxFuncLines = 80
)

// overLimitOwnedElsewhere are files over a limit that other work in
// progress owns (issue 17: the tool runner, the run host and broker, the
// process runner, the tool shell, the PTY relay); they are split when that
// work lands. An entry that is no longer over its limit fails the test,
// so the list only shrinks.
var overLimitOwnedElsewhere = map[string]bool{}

// TestNoLongFilesOrFunctions: no source file over maxFileLines lines and
// no function over maxFuncLines without a "long:" reason.
func TestNoLongFilesOrFunctions(t *testing.T) {
	over := map[string][]string{} // file -> what is over, for the message
	err := walkSources(".", func(p string) error {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines && !fileHasReason(f) {
			over[p] = append(over[p], fmt.Sprintf("%d lines", n))
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines && !hasReason(fd.Doc) {
				over[p] = append(over[p], fmt.Sprintf("func %s: %d lines", fd.Name.Name, n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for p := range over {
		files = append(files, p)
	}
	sort.Strings(files)
	for _, p := range files {
		if !overLimitOwnedElsewhere[filepath.ToSlash(p)] {
			t.Errorf("%s: %s (limits: %d lines a file, %d a function; split it, or say why in a \"long:\" comment)",
				p, strings.Join(over[p], ", "), maxFileLines, maxFuncLines)
		}
	}
	for p := range overLimitOwnedElsewhere {
		if over[filepath.FromSlash(p)] == nil {
			t.Errorf("%s is within the limits now: take it off overLimitOwnedElsewhere", p)
		}
	}
}

// hasReason reports whether a doc comment has a line "long: WHY".
func hasReason(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, l := range strings.Split(doc.Text(), "\n") {
		if r, ok := strings.CutPrefix(l, "long:"); ok && strings.TrimSpace(r) != "" {
			return true
		}
	}
	return false
}

// fileHasReason reports whether a comment before the file's first
// declaration has a line "long: WHY".
func fileHasReason(f *ast.File) bool {
	end := f.End()
	if len(f.Decls) > 0 {
		end = f.Decls[0].Pos()
	}
	for _, c := range f.Comments {
		if c.Pos() < end && hasReason(c) {
			return true
		}
	}
	return false
}
