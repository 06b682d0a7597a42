package fsops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenNoSymlinks opens path (absolute) as an O_PATH descriptor without
// following a symlink in any component: openat2 with RESOLVE_NO_SYMLINKS
// where the kernel has it (5.6), else one O_NOFOLLOW step per component.
// A symlink anywhere on the way is ELOOP. The caller closes the descriptor.
func OpenNoSymlinks(path string) (int, error) {
	// A relative path is taken from the current directory (the sandbox
	// init works inside its new root); it must be clean, never "..".
	if !filepath.IsAbs(path) && (path != filepath.Clean(path) || path == ".." || strings.HasPrefix(path, "../")) {
		return -1, fmt.Errorf("%s: not an absolute or clean relative path", path)
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err == nil {
		// O_PATH|O_NOFOLLOW opens a trailing symlink itself instead of
		// failing: that is a symlink on the way too.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			return -1, unix.ELOOP
		}
		return fd, nil
	}
	if err != unix.ENOSYS && err != unix.EPERM {
		return -1, err
	}
	return openNoSymlinksByComponent(path)
}

// openNoSymlinksByComponent walks path one component at a time, each step
// an openat with O_NOFOLLOW relative to the last: no component is ever
// resolved through a symlink, and ".." never appears (the path is clean).
func openNoSymlinksByComponent(path string) (int, error) {
	start := "/"
	if !filepath.IsAbs(path) {
		start = "."
	}
	fd, err := unix.Open(start, unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.Trim(filepath.Clean(path), "/"), "/") {
		if c == "" {
			continue
		}
		if c == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: a .. component", path)
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, unix.ELOOP
		}
		fd = next
	}
	return fd, nil
}

// ExplainNoSymlinks turns ELOOP from OpenNoSymlinks into the refusal it
// stands for.
func ExplainNoSymlinks(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return errors.New("a symlink on the way to the source (bind sources are never followed through symlinks; give the real path)")
	}
	return err
}

// FDPath names descriptor fd for syscalls that take a path: mounting
// /proc/self/fd/N mounts exactly the object the descriptor holds.
func FDPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// CloseInheritedOnExec marks every descriptor from 3 up close-on-exec, so
// that descriptors a caller left open (a shell's 7</, a leaked socket)
// never pass through ctx into a program it starts. Descriptors ctx hands a
// child on purpose are passed through exec.Cmd, which clears the flag on
// exactly those. close_range(CLOSE_RANGE_CLOEXEC) needs Linux 5.11; older
// kernels get the same through /proc/self/fd.
func CloseInheritedOnExec() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// OpenDirNoSymlinks opens directory path (O_PATH) without following any
// symlink; kernels without openat2 walk it. Errors are bare errnos:
// ENOENT (a component is missing), ELOOP (a symlink on the way, or path
// itself), ENOTDIR (a component is not a directory).
func OpenDirNoSymlinks(path string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err == unix.ENOSYS || err == unix.EPERM {
		fd, err = openNoSymlinksByComponent(path)
		if err == nil {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				unix.Close(fd)
				fd, err = -1, unix.ENOTDIR
			}
		}
	}
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		return -1, err
	}
	return fd, nil
}
