package fsops

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseMountInfo: the fields the run host uses (the cgroup
// hierarchies, the mounts inside a workspace), an escaped mount point,
// optional fields before the separator.
func TestParseMountInfo(t *testing.T) {
	in := "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n" +
		"50 23 0:40 /sub /work/my\\040ws ro,nosuid - ext4 /dev/vda rw\n" +
		"short line\n"
	got := parseMountInfo([]byte(in))
	want := []MountInfo{
		{Root: "/", Target: "/sys/fs/cgroup", Opts: "rw,relatime", FSType: "tmpfs", SuperOpts: "rw,mode=755"},
		{Root: "/", Target: "/sys/fs/cgroup/pids", Opts: "rw,relatime", FSType: "cgroup", SuperOpts: "rw,pids"},
		{Root: "/sub", Target: "/work/my ws", Opts: "ro,nosuid", FSType: "ext4", SuperOpts: "rw"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	table := MountTableOf(got)
	if len(table) != 3 || !table[2].ReadOnly || !table[2].NoSuid || table[2].Target != "/work/my ws" || table[0].ReadOnly {
		t.Errorf("table %+v", table)
	}
}

// FuzzParseMountInfo: any text parses without a panic into entries whose
// mount point came from their line.
func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte("39 31 0:36 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n"))
	f.Add([]byte("1 2 3 4 5 6 -\n - - - \\0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range parseMountInfo(b) {
			if m.Opts == "" || strings.Contains(m.Opts, "\n") {
				t.Fatalf("entry %+v", m)
			}
		}
	})
}
