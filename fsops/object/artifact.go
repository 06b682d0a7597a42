package object

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxArtifactSize bounds the executable an object may carry (hashing and
// copying read it whole).
const MaxArtifactSize = 1 << 30

// DevIno identifies an inode.
type DevIno struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func (d DevIno) String() string { return fmt.Sprintf("%d:%d", d.Dev, d.Ino) }

func devIno(st *unix.Stat_t) DevIno { return DevIno{Dev: uint64(st.Dev), Ino: st.Ino} }

// openNoSymlinks opens path read-only refusing a symlink in any component
// (openat2 RESOLVE_NO_SYMLINKS). Kernels without openat2 fall back to
// O_NOFOLLOW, which guards the final component only.
func openNoSymlinks(path string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err == unix.ENOSYS {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		if err == unix.ELOOP {
			return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("a symlink in the path (symlinks are not followed)")}
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Artifact is an opened, verified executable.
type Artifact struct {
	File *os.File
	Stat unix.Stat_t
}

// OpenArtifact opens the manifest's executable and checks that it is a
// regular file with an execute bit whose SHA-256 is the declared one. The
// file is left open at offset 0 so install copies the very inode it
// checked.
func OpenArtifact(m *Manifest) (*Artifact, error) {
	path := m.ArtifactPath()
	f, err := openNoSymlinks(path)
	if err != nil {
		return nil, invalidErr(err, "executable")
	}
	a := &Artifact{File: f}
	if err := unix.Fstat(int(f.Fd()), &a.Stat); err != nil {
		f.Close()
		return nil, invalidErr(err, "executable %s", path)
	}
	switch {
	case a.Stat.Mode&unix.S_IFMT != unix.S_IFREG:
		f.Close()
		return nil, invalidf("executable %s: not a regular file", path)
	case a.Stat.Mode&0o111 == 0:
		f.Close()
		return nil, invalidf("executable %s: no execute bit", path)
	case a.Stat.Size > MaxArtifactSize:
		f.Close()
		return nil, invalidf("executable %s: larger than %d bytes", path, MaxArtifactSize)
	}
	sum, err := hashFile(f, nil)
	if err != nil {
		f.Close()
		return nil, invalidErr(err, "executable %s", path)
	}
	if sum != m.SHA256 {
		f.Close()
		return nil, invalidf("executable %s: sha256 %s does not match the manifest's %s", path, sum, m.SHA256)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, invalidErr(err, "executable %s", path)
	}
	return a, nil
}

// Close closes the artifact.
func (a *Artifact) Close() error { return a.File.Close() }

// hashFile returns the hex SHA-256 of r's bytes, copying them to w as well
// when w is not nil.
func hashFile(r io.Reader, w io.Writer) (string, error) {
	h := sha256.New()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, io.LimitReader(r, MaxArtifactSize+1))
	if err != nil {
		return "", err
	}
	if n > MaxArtifactSize {
		return "", fmt.Errorf("larger than %d bytes", MaxArtifactSize)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Check performs everything install checks before publishing: the manifest
// and the artifact. It writes nothing.
func Check(manifestPath string) (*Manifest, error) {
	m, err := ReadManifest(manifestPath)
	if err != nil {
		return nil, err
	}
	a, err := OpenArtifact(m)
	if err != nil {
		return nil, err
	}
	a.Close()
	return m, nil
}
