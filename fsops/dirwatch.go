package fsops

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DirWatch tells when anything in a set of directories changes: an entry
// created, removed, renamed, written or its mode or owner changed, or the
// directory itself (inotify). The run host uses it to rewrite
// /mnt/proc/policy when a control changes, and to know that what it read
// from the tree for the last decision still stands. It says only that
// something changed, never what: the reader reads the tree again.
//
// The kernel queues an event when the change is made, before the system
// call that made it returns: a Changed after a change always reports it.
type DirWatch struct {
	mu      sync.Mutex
	fd      int
	file    *os.File // fd, for Wait's netpoller; it owns fd
	closed  bool
	failed  bool // a directory could not be watched: changes may be missed
	watched map[string]bool
	dirs    map[int32]string // by watch descriptor, for ChangedIn
	// above are the directories above the watch's top (see
	// AddWithAncestors), compared by status instead of inotify.
	above map[string]dirStatus
	// buf holds the queued events Changed reads: kept, since every tool
	// call's decision calls Changed, and the queue is almost always empty.
	buf []byte
}

// dirStatus is what a change to a directory above the top can change: its
// identity (a rename or a replacement), its mode and owner (the trust
// rule), and its change time (any of those, even when undone since).
type dirStatus struct {
	ok                  bool // it existed
	dev, ino            uint64
	mode, uid, gid      uint32
	ctimeSec, ctimeNsec int64
}

func statDir(path string) dirStatus {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return dirStatus{}
	}
	return dirStatus{true, st.Dev, st.Ino, st.Mode, st.Uid, st.Gid, st.Ctim.Sec, st.Ctim.Nsec}
}

// dirWatchMask is every change to a directory's entries, or to the
// directory itself, that can change a decision read from them.
const dirWatchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// NewDirWatch returns an empty watch.
func NewDirWatch() (*DirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &DirWatch{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), watched: map[string]bool{}, dirs: map[int32]string{}, above: map[string]dirStatus{}}, nil
}

// Add watches each of dirs not watched yet. A missing one is skipped (its
// parent, when watched, reports its creation); any other failure (the
// user's inotify watch limit) marks the watch as failed: Complete is
// false from then on.
func (w *DirWatch) Add(dirs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range dirs {
		if w.closed || w.watched[d] {
			continue
		}
		wd, err := unix.InotifyAddWatch(w.fd, d, dirWatchMask)
		switch {
		case err == nil:
			w.watched[d] = true
			w.dirs[int32(wd)] = d
		case err != unix.ENOENT && err != unix.ENOTDIR:
			w.failed = true
		}
	}
}

// AddWithAncestors watches dirs and every directory above them up to /:
// a change of mode, owner or name of an ancestor changes which tiers the
// trust rule accepts. Directories at or below top are watched with
// inotify. Those above it are not: an inotify watch on a directory costs
// the kernel a pass over every cached entry of it (each child dentry is
// marked), which for a crowded / or /tmp was a large part of an agent's start,
// and what matters about them is only themselves (name, mode, owner),
// never their other entries. Their status is kept instead and compared on
// every Changed: a few lstat calls, as exact as the events (a change is
// seen once the call that made it returned).
func (w *DirWatch) AddWithAncestors(top string, dirs ...string) {
	top = filepath.Clean(top)
	var all []string
	for _, d := range dirs {
		d = filepath.Clean(d)
		all = append(all, d)
		for p := filepath.Dir(d); ; p = filepath.Dir(p) {
			if within(p, top) {
				all = append(all, p)
			} else {
				w.keepStatus(p)
			}
			if p == "/" || p == "." {
				break
			}
		}
	}
	w.Add(all...)
}

// within reports whether path is dir or lies below it (both clean).
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

func (w *DirWatch) keepStatus(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.above[dir]; !ok && !w.closed {
		w.above[dir] = statDir(dir)
	}
}

// Complete reports whether every directory asked for is watched.
func (w *DirWatch) Complete() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.failed && !w.closed
}

// Changed consumes the changes queued so far and reports whether any is
// to an entry not named in ignore (logs the tree writes on every call).
// It never blocks. An overflowed queue counts as a change.
func (w *DirWatch) Changed(ignore map[string]bool) bool {
	return w.ChangedIn(func(_, name string) bool { return !ignore[name] })
}

// ChangedIn is Changed for the changes that matter: relevant is asked of
// each queued change, with the watched directory (as added; "" when the
// kernel names none, an overflowed queue among them, which is always a
// change) and the entry's name ("" for the directory itself).
func (w *DirWatch) ChangedIn(relevant func(dir, name string) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return true
	}
	changed := false
	for dir, was := range w.above {
		if now := statDir(dir); now != was {
			w.above[dir] = now
			changed = true
		}
	}
	if w.buf == nil {
		w.buf = make([]byte, 16<<10)
	}
	buf := w.buf
	for {
		n, err := unix.Read(w.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return changed
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			dir, ok := w.dirs[ev.Wd]
			if ok && ev.Mask&unix.IN_IGNORED != 0 {
				// The directory is gone (or its watch): a later Add
				// of its path watches what is there then.
				delete(w.watched, dir)
				delete(w.dirs, ev.Wd)
			}
			if !ok || relevant(dir, string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:end], "\x00"))) {
				changed = true
			}
			off = end
		}
	}
}

// Wait blocks until a change may be queued or timeout (milliseconds)
// passes, without consuming it. It returns false once the watch is closed.
// It waits in Go's netpoller (file), not in poll(2): a goroutine blocked
// in a system call for the whole run kept the runtime's monitor thread
// waking every 20 microseconds (fsops/broker/poll.go).
func (w *DirWatch) Wait(timeout int) bool {
	w.mu.Lock()
	f, closed := w.file, w.closed
	w.mu.Unlock()
	if closed {
		return false
	}
	f.SetReadDeadline(time.Now().Add(time.Duration(timeout) * time.Millisecond))
	if rc, err := f.SyscallConn(); err == nil {
		rc.Read(func(fd uintptr) bool {
			n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.closed
}

// Close ends the watch; a Wait in progress returns false at once.
func (w *DirWatch) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.file.Close()
}
