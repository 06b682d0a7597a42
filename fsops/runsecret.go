package fsops

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A run's secret tells the person who started the run apart from every
// agent, whatever uid they share (DESIGN §16 rule 12). The run host makes
// 32 random bytes when the run starts and writes them, hex, to a 0600
// file in the person's runtime directory (RunSecretPath), a place no
// sandbox mounts and no Landlock rule of any run reads (the run host
// refuses a plan that would expose it, sandboxplan.PlanExposes). A connection
// to the run's broker or terminal from outside the run must present it;
// one from inside proves instead that it comes from the run's own
// processes. The file goes with the run.

// runSecretBytes is the secret's length before hex encoding.
const runSecretBytes = 32

// maxSecretFile bounds what ReadRunSecret reads.
const maxSecretFile = 256

// RunSecretDir is the directory of the run secrets in runtime (a
// RuntimeDir): made 0700, never mounted.
func RunSecretDir(runtime string) string { return filepath.Join(runtime, "secret") }

// RunSecretPath is the secret file of the run whose run directory is
// named name (the last element of its path).
func RunSecretPath(runtime, name string) string {
	return filepath.Join(RunSecretDir(runtime), name)
}

// NewRunSecret returns a fresh secret, hex encoded.
func NewRunSecret() (string, error) {
	var b [runSecretBytes]byte
	if err := RandomBytes(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// WriteRunSecret writes secret to path, mode 0600, replacing what a dead
// run left there; the directory is made 0700 when missing. No symlink is
// followed, in the directory's last element or the file's.
func WriteRunSecret(path, secret string) error {
	if err := MkdirNoFollow(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	dir, err := OpenNoSymlinks(filepath.Dir(path))
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Dir(path), Err: ExplainNoSymlinks(err)}
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s: owned by uid %d with mode %04o, not this user's private (0700) directory",
			filepath.Dir(path), st.Uid, st.Mode&0o7777)
	}
	tmp := ".new-" + filepath.Base(path)
	unix.Unlinkat(dir, tmp, 0)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	_, err = unix.Write(fd, []byte(secret+"\n"))
	unix.Close(fd)
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, filepath.Base(path))
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// ReadRunSecret reads the secret at path (a regular file, no symlink
// followed in its last element).
func ReadRunSecret(path string) (string, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, maxSecretFile)
	n, _ := f.Read(b)
	s := strings.TrimSpace(string(b[:n]))
	if len(s) != 2*runSecretBytes {
		return "", fmt.Errorf("%s: not a run secret", path)
	}
	return s, nil
}

// SecretsEqual compares a presented secret with the run's in constant
// time; an empty one never matches.
func SecretsEqual(presented, secret string) bool {
	if presented == "" || secret == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(presented), []byte(secret)) == 1
}
