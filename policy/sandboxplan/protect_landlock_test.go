package sandboxplan

import (
	"errors"
	"os"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"

	"ctx/policy"
)

// fakeTree is a made-up file tree: absolute path -> 'd', 'f' or 'l'
// (directory, file, symlink). "/" is always a directory.
type fakeTree map[string]byte

func newFakeTree(paths ...string) fakeTree {
	t := fakeTree{"/": 'd'}
	for _, p := range paths {
		t.add(p)
	}
	return t
}

// add adds p ("/a/b/" a directory, "/a/b@" a symlink, else a file) and its
// directories; it reports false when a file or symlink stands on its way.
func (t fakeTree) add(p string) bool {
	kind := byte('f')
	switch {
	case strings.HasSuffix(p, "/"):
		kind = 'd'
	case strings.HasSuffix(p, "@"):
		kind, p = 'l', strings.TrimSuffix(p, "@")
	}
	p = path.Clean("/" + p)
	for dir := path.Dir(p); ; dir = path.Dir(dir) {
		if k, ok := t[dir]; ok && k != 'd' {
			return false
		}
		if dir == "/" {
			break
		}
	}
	if _, ok := t[p]; ok || p == "/" {
		return true
	}
	for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
		t[dir] = 'd'
	}
	t[p] = kind
	return true
}

func (t fakeTree) list(dir string) ([]ProtectDirEntry, error) {
	if t[dir] != 'd' {
		return nil, os.ErrNotExist
	}
	var out []ProtectDirEntry
	for p, k := range t {
		if p != "/" && path.Dir(p) == dir {
			out = append(out, ProtectDirEntry{Name: path.Base(p), Dir: k == 'd', Symlink: k == 'l'})
		}
	}
	return out, nil
}

func rulePaths(rules []AccessRule, write bool) []string {
	var out []string
	for _, r := range rules {
		if r.Write == write {
			out = append(out, r.Path)
		}
	}
	sort.Strings(out)
	return out
}

func TestProtectAccessWorkspace(t *testing.T) {
	tree := newFakeTree("/ws/.git/hooks/pre-commit.sample", "/ws/.git/config", "/ws/readme.txt", "/ws/src/main.c",
		"/ws/nested/.git/", "/ws/nested/code.go", "/ws/.config/foo", "/ws/link@", "/etc/passwd")
	access := []AccessRule{
		{Path: "/etc", Optional: true},
		{Path: "/ws", Write: true, Exec: true, Optional: true},
		{Path: "/home/a/data", Write: true, Optional: true},
	}
	targets := []string{"/ws/.git", "/ws/nested/.git", "/ws/.envrc", "/ws/.config/git", "/ws/.git/hooks"}
	d, err := ProtectAccess(access, targets, tree.list)
	if err != nil {
		t.Fatal(err)
	}
	wantWrite := []string{"/home/a/data", "/ws/.config/foo", "/ws/nested/code.go", "/ws/readme.txt", "/ws/src"}
	if got := rulePaths(d.Access, true); !reflect.DeepEqual(got, wantWrite) {
		t.Errorf("write rules %v, want %v", got, wantWrite)
	}
	if got := rulePaths(d.Access, false); !reflect.DeepEqual(got, []string{"/etc", "/ws"}) {
		t.Errorf("read rules %v", got)
	}
	for _, r := range d.Access {
		if strings.HasPrefix(r.Path, "/ws") && !r.Exec {
			t.Errorf("%s lost its exec right", r.Path)
		}
	}
	if want := []string{"/ws", "/ws/.config", "/ws/nested"}; !reflect.DeepEqual(d.Chain, want) {
		t.Errorf("chain %v, want %v", d.Chain, want)
	}
	if want := []string{"/ws/.config/git", "/ws/.envrc"}; !reflect.DeepEqual(d.Absent, want) {
		t.Errorf("absent %v, want %v", d.Absent, want)
	}
	if d.WriteRules != 4 || len(d.Demoted) != 0 || len(d.Unlisted) != 0 {
		t.Errorf("%+v", d)
	}
	checkProtectModel(t, tree, access, targets, d)
}

// From "/", as iso shared applies it: everything beside the way stays
// writable, nothing is created in a directory on the way.
func TestProtectAccessFromRoot(t *testing.T) {
	tree := newFakeTree("/tmp/x", "/home/me/ws/.git/config", "/home/me/ws/a.txt", "/home/me/.bashrc", "/home/other/",
		"/usr/bin/git", "/bin@", "/home/me/repo/.git/HEAD")
	access := []AccessRule{{Path: "/", Write: true}}
	targets := []string{"/home/me/ws/.git", "/home/me/repo/.git", "/home/me/ws/.envrc"}
	d, err := ProtectAccess(access, targets, tree.list)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/home/me/.bashrc", "/home/me/ws/a.txt", "/home/other", "/tmp", "/usr"}
	if got := rulePaths(d.Access, true); !reflect.DeepEqual(got, want) {
		t.Errorf("write rules %v, want %v", got, want)
	}
	if want := []string{"/", "/home", "/home/me", "/home/me/repo", "/home/me/ws"}; !reflect.DeepEqual(d.Chain, want) {
		t.Errorf("chain %v", d.Chain)
	}
	checkProtectModel(t, tree, access, targets, d)
}

func TestProtectAccessDemotesAndSkips(t *testing.T) {
	tree := newFakeTree("/ws/.git/hooks/", "/ws/a", "/ws/l@", "/other/x")
	access := []AccessRule{
		{Path: "/ws/.git/hooks", Write: true}, // inside a target: read-only whole
		{Path: "/ws", Write: true},
		{Path: "/other", Write: true}, // no target inside: as it was
		{Path: "/ws/.git", Write: true},
	}
	d, err := ProtectAccess(access, []string{"/ws/.git"}, tree.list)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/ws/.git/hooks", "/ws/.git"}; !reflect.DeepEqual(d.Demoted, want) {
		t.Errorf("demoted %v", d.Demoted)
	}
	if got, want := rulePaths(d.Access, true), []string{"/other", "/ws/a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("write rules %v, want %v (no rule for the symlink)", got, want)
	}
	checkProtectModel(t, tree, access, []string{"/ws/.git"}, d)
}

func TestProtectAccessRefusals(t *testing.T) {
	// a symlink on the way
	tree := newFakeTree("/ws/sub@", "/ws/a")
	if _, err := ProtectAccess([]AccessRule{{Path: "/ws", Write: true}}, []string{"/ws/sub/.git"}, tree.list); err == nil ||
		!strings.Contains(err.Error(), "/ws/sub is a symlink on the way") {
		t.Errorf("symlink on the way: %v", err)
	}
	// a chain directory with too many entries names the directory
	tree = newFakeTree("/ws/.git/")
	for i := 0; i < MaxProtectDirEntries; i++ {
		tree.add("/ws/big/f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i))
	}
	tree.add("/ws/big/.git/")
	_, err := ProtectAccess([]AccessRule{{Path: "/ws", Write: true}}, []string{"/ws/.git", "/ws/big/.git"}, tree.list)
	var le *ProtectLimitError
	if !errors.As(err, &le) || le.Dir != "/ws/big" || le.Entries != MaxProtectDirEntries+1 || !strings.Contains(err.Error(), "/ws/big") {
		t.Errorf("too many entries: %v", err)
	}
	// exactly the bound is fine
	tree = newFakeTree("/ws/.git/")
	for i := 1; i < MaxProtectDirEntries; i++ {
		tree.add("/ws/f" + itoa(i))
	}
	if d, err := ProtectAccess([]AccessRule{{Path: "/ws", Write: true}}, []string{"/ws/.git"}, tree.list); err != nil || d.WriteRules != MaxProtectDirEntries-1 {
		t.Errorf("at the bound: %v", err)
	}
	if _, err := ProtectAccess(nil, []string{"ws/.git"}, tree.list); err == nil {
		t.Error("a relative target is accepted")
	}
}

func TestProtectAccessUnlisted(t *testing.T) {
	tree := newFakeTree("/ws/.git/", "/ws/a")
	list := func(dir string) ([]ProtectDirEntry, error) {
		if dir == "/ws" {
			return nil, os.ErrPermission
		}
		return tree.list(dir)
	}
	d, err := ProtectAccess([]AccessRule{{Path: "/ws", Write: true}}, []string{"/ws/.git"}, list)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Unlisted, []string{"/ws"}) || d.WriteRules != 0 || len(rulePaths(d.Access, true)) != 0 {
		t.Errorf("%+v", d)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// checkProtectModel checks a decomposition against Landlock's semantics on
// the tree: a path may be written when a write rule is at or above it; an
// entry may be made or removed in a directory a write rule is at or above.
func checkProtectModel(t *testing.T, tree fakeTree, before []AccessRule, targets []string, d *ProtectDecomposition) {
	t.Helper()
	writes := func(rules []AccessRule, p string) bool {
		for _, r := range rules {
			if r.Write && policy.Within(p, r.Path) {
				return true
			}
		}
		return false
	}
	ts, _ := protectTargets(targets)
	// 1. Nothing at, inside or on the way to a target is writable where it
	// lies in a writable rule: no write in it, no entry made or removed
	// on the way (so an absent target is not made either).
	for _, tg := range ts {
		for p := range tree {
			if policy.Within(p, tg) && writes(d.Access, p) {
				t.Errorf("%s (protected %s) is writable", p, tg)
			}
		}
		for a := path.Dir(tg); ; a = path.Dir(a) {
			if tree[a] == 'd' && writes(d.Access, a) {
				t.Errorf("%s, on the way to %s, is writable", a, tg)
			}
			if a == "/" {
				break
			}
		}
	}
	// 2. Nothing became writable that was not, and every rule's path keeps
	// its read (and exec) rights.
	for _, r := range d.Access {
		if r.Write && !writes(before, r.Path) {
			t.Errorf("rule %s writable, was not", r.Path)
		}
	}
	for _, b := range before {
		found := false
		for _, r := range d.Access {
			found = found || (r.Path == b.Path && r.Exec == b.Exec && r.Dev == b.Dev)
		}
		if !found {
			t.Errorf("rule %s lost", b.Path)
		}
	}
	// 3. Everything else that was writable still is: any path not at, in
	// or on the way to a target (symlinks aside: they get no rule).
	unlisted := map[string]bool{}
	for _, u := range d.Unlisted {
		unlisted[u] = true
	}
	for p, k := range tree {
		if k == 'l' || !writes(before, p) {
			continue
		}
		inUnlisted := false
		for a := path.Dir(p); a != "/"; a = path.Dir(a) {
			inUnlisted = inUnlisted || unlisted[a]
		}
		if inUnlisted || unlisted["/"] && p != "/" {
			continue
		}
		onWay := false
		for _, tg := range ts {
			onWay = onWay || policy.Within(p, tg) || policy.Within(tg, p)
		}
		if !onWay && !writes(d.Access, p) {
			t.Errorf("%s is no longer writable", p)
		}
	}
	// 4. Absent lists exactly the targets in a decomposed rule not in the tree.
	for _, a := range d.Absent {
		if _, ok := tree[a]; ok {
			t.Errorf("absent %s exists", a)
		}
	}
}

// FuzzProtectAccess builds a tree, rules and targets from lines ("d P", "f
// P", "l P" entries; "w P" and "r P" write and read rules; "t P" targets)
// and checks the decomposition against the model.
func FuzzProtectAccess(f *testing.F) {
	f.Fuzz(func(t *testing.T, spec string) {
		tree := fakeTree{"/": 'd'}
		var access []AccessRule
		var targets []string
		lines := strings.Split(spec, "\n")
		if len(lines) > 200 {
			lines = lines[:200]
		}
		for _, l := range lines {
			if len(l) < 3 || l[1] != ' ' || strings.ContainsRune(l, 0) {
				continue
			}
			p := path.Clean("/" + l[2:])
			switch l[0] {
			case 'd':
				tree.add(p + "/")
			case 'f':
				tree.add(p)
			case 'l':
				tree.add(p + "@")
			case 'w', 'r', 'x':
				access = append(access, AccessRule{Path: p, Write: l[0] == 'w', Exec: l[0] == 'x'})
			case 't':
				targets = append(targets, p)
			}
		}
		d, err := ProtectAccess(access, targets, tree.list)
		if err != nil {
			var le *ProtectLimitError
			if errors.As(err, &le) || strings.Contains(err.Error(), "symlink on the way") {
				return
			}
			t.Fatalf("unexpected error %v", err)
		}
		checkProtectModel(t, tree, access, targets, d)
		again, err := ProtectAccess(access, targets, tree.list)
		if err != nil || !reflect.DeepEqual(again, d) {
			t.Fatalf("not deterministic: %v", err)
		}
	})
}
