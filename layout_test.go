package main

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The layout rules of ctx (DESIGN §2), held in one place: which package may
// import which, that adapters make no system calls, and that exit statuses
// are written only as names. size_test.go (file and function length) and
// deadcode_test.go (unused declarations) hold the rest.

// rank orders the packages of the module from the leaves up: a package
// imports only packages of a lower rank (no cycles, nothing upward).
// Siblings of one rank import each other only as sameRank allows. A new
// package fails TestPackageImports until it is given a rank here, so where
// it sits is decided in review, not by accident.
var rank = map[string]int{
	"ctx/manual":              0,
	"ctx/policy/schema":       0,
	"ctx/fsops/proc":          0,
	"ctx/policy":              1, // pure decisions: nothing of ctx but its schema
	"ctx/policy/sandboxplan":  2, // the sandbox plan, built as data from policy's decisions
	"ctx/fsops":               3, // the on-disk ABI
	"ctx/fsops/object":        4,
	"ctx/fsops/queue":         4,
	"ctx/fsops/broker":        4, // the wire of the run host's broker
	"ctx/fsops/cgroup":        4, // a run's cgroup: its budgets held by the kernel
	"ctx/fsops/protectsearch": 4, // a workspace's protected paths, found at a run's start
	"ctx/fsops/sandbox":       5, // the init and its walls
	"ctx/fsops/toolworker":    5, // a tool worker's own side (sandbox starts it)
	"ctx/fsops/kept":          6, // what runs keep between them: sandbox templates
	"ctx/fsops/netproxy":      4,
	"ctx/ptyterm":             6,
	"ctx/mcpstdio":            6,
	// applets: leaves first; the table (ctx/applets) above every room.
	"ctx/applets/cli":       7,
	"ctx/applets/authority": 8,
	"ctx/applets/toolchain": 9, // what a sandbox shows of the host and of a person's toolchains
	"ctx/applets/tsh":       9,
	"ctx/applets/toolrun":   10,
	"ctx/applets/lifecycle": 11,
	"ctx/applets/egress":    11, // a run's egress proxy, lent the run host's decisions
	"ctx/applets/runhost":   12,
	"ctx/applets/mcp":       13,
	"ctx/applets/ctx":       14,
	"ctx/applets":           15,
	"ctx":                   16,
}

// sameRank lists the imports allowed between packages of one rank.
var sameRank = map[[2]string]bool{
	{"ctx/fsops/sandbox", "ctx/fsops/toolworker"}: true, // the worker's applet name and descriptor
}

// onlyImports narrows the rank rule for the leaves that must stay pure:
// policy decides on what it is handed and touches nothing (DESIGN §2).
var onlyImports = map[string][]string{
	"ctx/policy":             {"ctx/policy/schema"},
	"ctx/policy/sandboxplan": {"ctx/policy"},
	"ctx/policy/schema":      {},
	"ctx/manual":             {},
	"ctx/fsops/proc":         {},
}

// moduleImports returns, for every package directory of the module, the
// ctx packages its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	imports := map[string]map[string]bool{}
	err := walkSources(".", func(p string) error {
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := "ctx"
		if dir := filepath.ToSlash(filepath.Dir(p)); dir != "." {
			pkg += "/" + dir
		}
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if path == "ctx" || strings.HasPrefix(path, "ctx/") {
				imports[pkg][path] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for pkg, set := range imports {
		out[pkg] = []string{}
		for path := range set {
			out[pkg] = append(out[pkg], path)
		}
		sort.Strings(out[pkg])
	}
	return out
}

// TestPackageImports holds the package graph: every package has a rank and
// imports only packages below it.
func TestPackageImports(t *testing.T) {
	for pkg, imps := range moduleImports(t) {
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("%s has no rank in layout_test.go: decide which rooms it may use", pkg)
			continue
		}
		for _, imp := range imps {
			if only, ok := onlyImports[pkg]; ok && !slices.Contains(only, imp) {
				t.Errorf("%s imports %s: it may import only %v", pkg, imp, only)
				continue
			}
			ir, ok := rank[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no rank", pkg, imp)
			case ir > r || ir == r && !sameRank[[2]string{pkg, imp}]:
				t.Errorf("%s (rank %d) imports %s (rank %d): upward or sideways", pkg, r, imp, ir)
			}
		}
	}
}

// maxPackageLines bounds the non-test lines of one package (issue 34): a
// package past it holds more than one concern under one name, as fsops
// did with the sandbox and the broker's wire in it.
const maxPackageLines = 6000

// packagesOverLimit are packages over maxPackageLines that are owed a
// split (issue 34): none now. An entry no longer over the limit fails the
// test, so the list only shrinks.
var packagesOverLimit = map[string]bool{}

// TestPackageSize: no package over maxPackageLines non-test lines.
func TestPackageSize(t *testing.T) {
	lines := map[string]int{}
	err := walkSources(".", func(p string) error {
		src, err := os.ReadFile(p)
		lines[filepath.ToSlash(filepath.Dir(p))] += bytes.Count(src, []byte("\n"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range lines {
		if n > maxPackageLines && !packagesOverLimit[dir] {
			t.Errorf("%s: %d non-test lines (limit %d): split it into packages by concern", dir, n, maxPackageLines)
		}
	}
	for dir := range packagesOverLimit {
		if lines[dir] <= maxPackageLines {
			t.Errorf("%s is within %d lines now: take it off packagesOverLimit", dir, maxPackageLines)
		}
	}
}

// notActs are the names of package unix and syscall an adapter may call:
// conversions and names of numbers, which touch nothing.
var notActs = map[string]bool{"Errno": true, "ErrnoName": true, "Signal": true, "SignalName": true}

// TestAppletsMakeNoSystemCalls holds "fsops acts, applets adapt": no source
// file under applets/ calls package unix or syscall (but for notActs); what
// it needs done is an fsops function with a name.
func TestAppletsMakeNoSystemCalls(t *testing.T) {
	inspectSources(t, "applets", func(p string, fset *token.FileSet, n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "unix" || pkg.Name == "syscall") && !notActs[sel.Sel.Name] {
			t.Errorf("%s: %s.%s: an applet calls the kernel itself (give the act a name in fsops)",
				fset.Position(call.Pos()), pkg.Name, sel.Sel.Name)
		}
	})
}

// exitLiterals are the exit statuses of the tool ABI (ctx man ctx.tool,
// EXIT STATUS) that must be written by name.
var exitLiterals = map[string]bool{"13": true, "69": true, "70": true, "75": true, "126": true, "127": true, "128": true}

// exitNumbersHome are the packages that may write them as numbers:
// fsops/proc, their one home, and applets/cli, the applets' table.
var exitNumbersHome = map[string]bool{"fsops/proc": true, "applets/cli": true}

// notExitStatuses are files where one of those numbers means something
// else, and what.
var notExitStatuses = map[string]string{
	"ptyterm/secret.go":              "128 hex digits bound the secret line",
	"fsops/sandbox/unixgate_host.go": "128 is sizeof(struct sockaddr_storage)",
}

// TestNoExitLiterals: no exit status is written as a number anywhere in
// the module but in its home (exitNumbersHome): one table, one
// start-failure mapping (proc.StartFailure), nothing to drift. A number
// that is the whole value of a named constant (MaxSecretKeyLen = 128) is
// a name already, and passes.
func TestNoExitLiterals(t *testing.T) {
	named := map[ast.Node]bool{}
	inspectSources(t, ".", func(p string, fset *token.FileSet, n ast.Node) {
		if d, ok := n.(*ast.GenDecl); ok && d.Tok == token.CONST {
			for _, spec := range d.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					named[v] = true
				}
			}
		}
		lit, ok := n.(*ast.BasicLit)
		p = filepath.ToSlash(p)
		if !ok || named[lit] || lit.Kind != token.INT || !exitLiterals[lit.Value] || exitNumbersHome[path.Dir(p)] || notExitStatuses[p] != "" {
			return
		}
		t.Errorf("%s: exit status %s as a literal (use the names of fsops/proc or applets/cli)", fset.Position(lit.Pos()), lit.Value)
	})
}

// TestGofmt: every Go file of the module is as gofmt prints it, so a diff
// shows only what changed.
func TestGofmt(t *testing.T) {
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if out, err := format.Source(src); err != nil || !bytes.Equal(out, src) {
			t.Errorf("%s is not gofmt'ed (run gofmt -w %s)", p, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkSources calls visit with the path of every non-test Go source file
// of the module under dir (outside testdata and hidden directories): the
// one walk the layout and size tests share.
func walkSources(dir string, visit func(path string) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		return visit(p)
	})
}

// inspectSources calls visit for every node of every non-test Go file under dir.
func inspectSources(t *testing.T, dir string, visit func(path string, fset *token.FileSet, n ast.Node)) {
	t.Helper()
	err := walkSources(dir, func(p string) error {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			visit(p, fset, n)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
