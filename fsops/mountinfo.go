package fsops

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"ctx/policy"
)

// MountInfo is one line of a mount table (/proc/self/mountinfo): the
// mount's root within its filesystem, its mount point, its per-mount
// options, and the filesystem's type and super options.
type MountInfo struct {
	Root, Target, Opts, FSType, SuperOpts string
}

// ReadMountInfo reads this process's mount table, in mount order. The
// kernel renders it anew at every read (a path and the options of each
// mount): a run host that needs it for several things (the run's cgroup,
// the mounts inside the workspace) reads it once.
func ReadMountInfo() ([]MountInfo, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountInfo(b), nil
}

// MountInfoOnce is a mount table read at its first use and kept: a run
// host reads it once for its start, which needs it twice (the cgroup
// hierarchies, the mounts inside the workspace).
type MountInfoOnce struct {
	once  sync.Once
	table []MountInfo
	err   error
}

// Read returns the table, read at the first call.
func (m *MountInfoOnce) Read() ([]MountInfo, error) {
	m.once.Do(func() { m.table, m.err = ReadMountInfo() })
	return m.table, m.err
}

// parseMountInfo parses the lines of a mountinfo file; a line of fewer
// than six fields before the separator is skipped.
func parseMountInfo(b []byte) []MountInfo {
	var out []MountInfo
	for _, line := range strings.Split(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		before, after, _ := strings.Cut(line, " - ")
		f, g := strings.Fields(before), strings.Fields(after)
		if len(f) < 6 {
			continue
		}
		m := MountInfo{Root: UnescapeMountinfo(f[3]), Target: UnescapeMountinfo(f[4]), Opts: f[5]}
		if len(g) >= 3 {
			m.FSType, m.SuperOpts = g[0], g[2]
		}
		out = append(out, m)
	}
	return out
}

// MountTable reads this process's mount table (/proc/self/mountinfo) as
// policy mount entries, in mount order: each mount point is both source and
// target (inside a sandbox host and sandbox paths are the same), with its
// per-mount ro, nosuid, nodev and noexec flags. A later mount at the same
// point covers an earlier one.
func MountTable() ([]policy.Mount, error) {
	infos, err := ReadMountInfo()
	if err != nil {
		return nil, err
	}
	return MountTableOf(infos), nil
}

// MountTableOf is MountTable of a table already read.
func MountTableOf(infos []MountInfo) []policy.Mount {
	var out []policy.Mount
	for _, mi := range infos {
		m := policy.Mount{Source: mi.Target, Target: mi.Target}
		for _, opt := range strings.Split(mi.Opts, ",") {
			switch opt {
			case "ro":
				m.ReadOnly = true
			case "nosuid":
				m.NoSuid = true
			case "nodev":
				m.NoDev = true
			case "noexec":
				m.NoExec = true
			}
		}
		out = append(out, m)
	}
	return out
}

// UnescapeMountinfo decodes the octal escapes (\040 for a space) of a
// mountinfo path field.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
