package fsops

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The holder of an idmap's user namespace gives a namespace with the
// asked maps, traced (stopped at its exec) or not, and is gone after.
func TestHoldUserns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("maps another uid: needs root")
	}
	requireSandbox(t)
	self, err := Executable()
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
		src, err := OpenNoSymlinks(dir)
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
