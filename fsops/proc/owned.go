package proc

import (
	"io/fs"
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
		if othersOwn(fi, uid) {
			return p, true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", false
		}
		p = parent
	}
}

// maxTreeEntries bounds the entries TreeOthersMayChange examines: a
// toolchain's tree holds tens of thousands (rustup's docs); a tree larger
// than this is not examined whole, and counts as changed by others.
const maxTreeEntries = 500000

// TreeOthersMayChange is OthersMayChange for a whole tree: dir and the
// directories above it, then every entry below it, links not followed (a
// link is shown as a link, and leads where the viewer's own view does).
// Each entry below is judged by itself, its directories above already
// judged on the way down. It returns the first path someone other than
// root and uid may have chosen.
func TreeOthersMayChange(dir string, uid int) (string, bool) {
	dir = filepath.Clean(dir)
	if at, changed := OthersMayChange(dir, uid); changed {
		return at, true
	}
	entries, bad := 0, ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if entries++; err != nil || entries > maxTreeEntries {
			bad = p
			return filepath.SkipAll
		}
		fi, err := d.Info()
		if err != nil || othersOwn(fi, uid) {
			bad = p
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil && bad == "" {
		bad = dir
	}
	return bad, bad != ""
}

// othersOwn reports whether fi, an entry not followed, is owned by someone
// other than root and uid, or writable by its group or everyone (a link's
// mode means nothing; a root-owned sticky directory passes).
func othersOwn(fi os.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid != 0 && int(st.Uid) != uid) {
		return true
	}
	sticky := fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && st.Uid == 0
	return fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 && !sticky
}
