package fsops

import (
	"os"
	"strconv"
	"strings"

	"ctx/policy"
)

// MountTable reads this process's mount table (/proc/self/mountinfo) as
// policy mount entries, in mount order: each mount point is both source and
// target (inside a sandbox host and sandbox paths are the same), with its
// per-mount ro, nosuid, nodev and noexec flags. A later mount at the same
// point covers an earlier one.
func MountTable() ([]policy.Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []policy.Mount
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 {
			continue
		}
		mp := UnescapeMountinfo(fields[4])
		m := policy.Mount{Source: mp, Target: mp}
		for _, opt := range strings.Split(fields[5], ",") {
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
	return out, nil
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
