package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// The holder of an idmap's user namespace gives a namespace with the
// asked maps, traced (stopped at its exec) or not, and is gone after.
func TestHoldUserns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("maps another uid: needs root")
	}
	requireSandbox(t)
	self, err := fsops.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := IDMapping{DiskUID: 0, DiskGID: 0, UID: 4321, GID: 4322}
	for _, traced := range []bool{true, false} {
		ns, err := holdUserns(self, m, traced)
		if err != nil {
			t.Fatalf("traced=%v: %v", traced, err)
		}
		// The namespace is a user namespace whose maps are the asked
		// ones: an idmapped tree can be made with it.
		if _, err := unix.IoctlGetInt(int(ns.Fd()), unix.NS_GET_NSTYPE); err != nil {
			t.Fatalf("traced=%v: not a namespace: %v", traced, err)
		}
		dir := t.TempDir()
		src, err := fsops.OpenNoSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		unix.Close(src)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())})
		unix.Close(tree)
		ns.Close()
		if err != nil {
			t.Fatalf("traced=%v: idmapping with the held namespace: %v", traced, err)
		}
	}
	// No holder is left, running or stopped (traced, it would show as
	// our child in state t).
	procs, _ := os.ReadDir("/proc")
	me := "PPid:\t" + strconv.Itoa(os.Getpid()) + "\n"
	for _, p := range procs {
		status, err := os.ReadFile("/proc/" + p.Name() + "/status")
		if err != nil || !strings.Contains(string(status), me) {
			continue
		}
		if cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline"); strings.HasPrefix(string(cmd), UsernsHoldApplet) {
			t.Fatalf("holder %s is still there:\n%s", p.Name(), status)
		}
	}
}

// The namespace of a mapping is kept in the runtime directory and given
// again, and nothing planted at its name is taken for it: not a symlink
// (whose target stays as it was), not a plain file, not a namespace of
// another kind.
func TestPinnedUserns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("maps another uid and mounts: needs root")
	}
	requireSandbox(t)
	runtime := t.TempDir()
	pins := filepath.Join(runtime, usernsPinDir)
	t.Cleanup(func() {
		names, _ := fsops.DirNames(pins)
		for _, n := range names {
			unix.Unmount(filepath.Join(pins, n), unix.MNT_DETACH)
		}
	})
	nsIno := func(f *os.File) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	// seenOwner is the owner a root-owned file shows through a tree
	// idmapped with ns: the mapping's uid, if ns is what it claims.
	disk := t.TempDir()
	os.WriteFile(filepath.Join(disk, "f"), nil, 0o600)
	seenOwner := func(ns *os.File) (uint32, error) {
		src, err := fsops.OpenNoSymlinks(disk)
		if err != nil {
			return 0, err
		}
		defer unix.Close(src)
		tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		if err != nil {
			return 0, err
		}
		defer unix.Close(tree)
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}); err != nil {
			return 0, err
		}
		var st unix.Stat_t
		err = unix.Fstatat(tree, "f", &st, unix.AT_SYMLINK_NOFOLLOW)
		return st.Uid, err
	}
	m := IDMapping{DiskUID: 0, DiskGID: 0, UID: 4321, GID: 4322}
	first, err := pinnedUserns(runtime, m)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if uid, err := seenOwner(first); err != nil || uid != 4321 {
		t.Fatalf("the namespace maps root to %d (%v), want 4321", uid, err)
	}
	second, err := pinnedUserns(runtime, m)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if nsIno(first) != nsIno(second) {
		t.Errorf("the second start got a new namespace, not the kept one")
	}
	// Another mapping gets its own.
	other, err := pinnedUserns(runtime, IDMapping{UID: 4323, GID: 4323})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if nsIno(other) == nsIno(first) {
		t.Errorf("another mapping got the same namespace")
	}

	// Planted at a mapping's name: each is refused, left alone where it
	// is not a mount point left behind, and a fresh namespace is given.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	planted := map[string]func(string) error{
		"map-0-0-5001-5001": func(p string) error { return os.Symlink(victim, p) },
		"map-0-0-5002-5002": func(p string) error { return os.Symlink("/proc/self/ns/user", p) },
		"map-0-0-5003-5003": func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) },
	}
	for name, plant := range planted {
		if err := plant(filepath.Join(pins, name)); err != nil {
			t.Fatal(err)
		}
		var uid uint32
		fmt.Sscanf(name, "map-0-0-%d", &uid)
		ns, err := pinnedUserns(runtime, IDMapping{UID: uid, GID: uid})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, err := seenOwner(ns); err != nil || got != uid {
			t.Errorf("%s: the namespace given maps root to %d (%v), want %d", name, got, err, uid)
		}
		if nsIno(ns) == nsIno(first) {
			t.Errorf("%s: got another mapping's namespace", name)
		}
		ns.Close()
		if st, err := os.Lstat(filepath.Join(pins, name)); err != nil || st.Mode()&os.ModeSymlink == 0 && st.Size() == 0 {
			t.Errorf("%s: the planted file was replaced (%v)", name, err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target changed: %q", b)
	}
	// A mount point whose mount went away (an empty file) is kept again.
	stale := filepath.Join(pins, "map-0-0-5004-5004")
	os.WriteFile(stale, nil, 0o400)
	ns, err := pinnedUserns(runtime, IDMapping{UID: 5004, GID: 5004})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	again, err := openPinnedUserns(stale)
	if err != nil {
		t.Fatalf("the stale mount point was not kept again: %v", err)
	}
	defer again.Close()
	if nsIno(again) != nsIno(ns) {
		t.Errorf("the kept namespace is not the one given")
	}
}
