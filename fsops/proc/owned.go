package proc

import (
	"os"
	"path/filepath"
	"syscall"
)

// OthersMayChange reports whether someone other than root and uid may
// have chosen what is at path p: p itself (a link is not followed) or
// a directory above it is owned by another user, or writable by its group
// or by everyone. A root-owned sticky directory (/tmp) passes as a
// directory above: others may not rename or remove what it holds, and
// whose its entry is, is checked. It returns the first such path, the
// way sshd's StrictModes judges a key file. A path that cannot be
// examined counts as changed by others.
func OthersMayChange(p string, uid int) (string, bool) {
	p = filepath.Clean(p)
	for {
		fi, err := os.Lstat(p)
		if err != nil {
			return p, true
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || (st.Uid != 0 && int(st.Uid) != uid) {
			return p, true
		}
		sticky := fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && st.Uid == 0
		if fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 && !sticky {
			return p, true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", false
		}
		p = parent
	}
}
