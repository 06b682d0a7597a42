package fsops

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Runtime paths are keyed by the tree as well as by uid, agent and
// session (DESIGN §8): two trees used by one user, each running an agent
// coder in session default, bind two terminal sockets and keep two sets
// of run directories, and what looks for a live run of one tree never
// looks among another's. The key names the tree by its root directory's
// device and inode, not by its path: a tree reached by two paths (a
// symlink, a bind mount, --root given relative or through a link) is one
// tree with one key, and two trees that exist at once never share one.
// Device numbers may change across a reboot or a remount, which the
// runtime directory (a tmpfs /run, cleared at boot) does not outlive
// anyway.

// treeKeyPrefix starts the name of a tree's level in a runtime path.
const treeKeyPrefix = "tree-"

// RuntimeKey is the tree's key in runtime paths: "tree-" and 12 hex
// digits of the SHA-256 of the root directory's "DEV:INO" (48 bits: a
// collision among the few trees of one user is out of reach).
func (r Root) RuntimeKey() (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(r.Dir, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: r.Dir, Err: err}
	}
	sum := sha256.Sum256([]byte(strconv.FormatUint(st.Dev, 10) + ":" + strconv.FormatUint(st.Ino, 10)))
	return treeKeyPrefix + hex.EncodeToString(sum[:6]), nil
}

// TreeRuntimeDir is the tree's level of uid's runtime directory,
// RUNTIME/KEY (KEY a RuntimeKey), made 0700 if missing: the run
// directories (run/RUN) and the protect rules of that tree's runs live
// there. (The kept user namespaces, RUNTIME/userns, stay the user's: each
// is named by its id mapping and holds nothing of a run.)
func TreeRuntimeDir(uid int, key string) (string, error) {
	runtime, err := RuntimeDir(uid)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(runtime, key)
	if err := MkdirNoFollow(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}
