package fsops

import (
	"bytes"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DirWatch tells when anything in a set of directories changes: an entry
// created, removed, renamed, written or its mode changed (inotify). The
// run host uses it to rewrite /mnt/proc/policy when a control changes,
// without recomputing it on every tool call. It says only that something
// changed, never what: the reader recomputes from the tree.
type DirWatch struct {
	f       *os.File // nonblocking, in the runtime's poller: Close wakes Wait
	watched map[string]bool
}

// dirWatchMask is every change to a directory's entries that can change a
// decision read from them.
const dirWatchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// NewDirWatch returns an empty watch.
func NewDirWatch() (*DirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &DirWatch{f: os.NewFile(uintptr(fd), "inotify"), watched: map[string]bool{}}, nil
}

// Add watches each of dirs not watched yet; a missing one is skipped (its
// parent, when watched, reports its creation).
func (w *DirWatch) Add(dirs ...string) {
	for _, d := range dirs {
		if w.watched[d] {
			continue
		}
		// Through the raw descriptor: Fd would make it blocking.
		var err error
		if rc, e := w.f.SyscallConn(); e == nil {
			rc.Control(func(fd uintptr) { _, err = unix.InotifyAddWatch(int(fd), d, dirWatchMask) })
		}
		if err == nil {
			w.watched[d] = true
		}
	}
}

// Wait blocks until something changed in a watched directory (true), or
// the watch is closed (false). Changes to entries named in ignore (logs
// the tree writes on every call) do not count.
func (w *DirWatch) Wait(ignore map[string]bool) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil || n <= 0 {
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:end], "\x00"))
			if !ignore[name] {
				return true
			}
			off = end
		}
	}
}

// Close ends the watch; a Wait in progress returns false.
func (w *DirWatch) Close() error {
	return w.f.Close()
}
