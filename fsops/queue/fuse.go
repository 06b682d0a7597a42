package queue

import (
	"errors"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// libfuse's high-level library (sshfs) does not remove a file that is
// still open: it renames it to .fuse_hiddenNNN and removes that when the
// last handle closes. The kernel closes a FUSE file asynchronously, so a
// file the queue has just written, closed and then removed (a lease's
// temporary after its link, a lease read by Finish and then removed) can
// stand in its directory under such a name for a moment after the
// removal returned. Such a placeholder is not evidence and goes by itself;
// sshfs 3 has no option to turn the renaming off (libfuse 2's
// hard_remove).

// placeholderPrefix begins the names libfuse gives those files.
const placeholderPrefix = ".fuse_hidden"

// placeholderWait bounds how long a removal waits for placeholders to go.
const placeholderWait = 5 * time.Second

// fusePlaceholder reports whether name, an entry of one of this queue's
// directories, is such a placeholder: only on a FUSE filesystem.
func (q *Queue) fusePlaceholder(name string) bool {
	return strings.HasPrefix(q.fs.Type, "fuse") && strings.HasPrefix(name, placeholderPrefix)
}

// removeSettledDir removes the directory name in parent (parentPath) as
// removeEntry does; when it is not empty only because of placeholders
// (listed through dirfd, the directory itself, when >= 0), it waits for
// them to go, up to placeholderWait, and removes it then.
func (q *Queue) removeSettledDir(parent int, parentPath, name string, dirfd int) (bool, error) {
	removed, err := removeEntry(parent, parentPath, name, true)
	deadline := time.Now().Add(placeholderWait)
	for pause := time.Millisecond; errors.Is(err, unix.ENOTEMPTY) && dirfd >= 0; pause = min(2*pause, 100*time.Millisecond) {
		if !q.onlyPlaceholders(dirfd) || time.Now().After(deadline) {
			break
		}
		time.Sleep(pause)
		removed, err = removeEntry(parent, parentPath, name, true)
	}
	return removed, err
}

// onlyPlaceholders reports whether the directory open at dirfd holds
// placeholders and nothing else, or nothing at all: the last one may go
// between a removal refused as not empty and this listing, and the
// removal is then tried again.
func (q *Queue) onlyPlaceholders(dirfd int) bool {
	// A fresh descriptor: a FUSE directory handle read to its end lists
	// nothing again.
	fresh, err := openDirAt(dirfd, ".")
	if err != nil {
		return false
	}
	ents, err := readDir(fresh, "")
	unix.Close(fresh)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !q.fusePlaceholder(e.Name) {
			return false
		}
	}
	return true
}
