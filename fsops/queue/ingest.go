package queue

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Skip is an inbox entry Ingest left where it was, and why.
type Skip struct {
	Name   string
	Reason string
}

// Ingest publishes the valid requests in inbox/, the drop box for
// producers that do not run ctx. A producer writes its file under a dot
// name in inbox/ (dot names are never touched) and renames it to J when
// complete, as in maildir. For each other entry, in name order, Ingest
// requires a valid job name, a regular file (never a symlink), a single
// hard link (a link to a file elsewhere is not the producer's to give), at
// most MaxRequest bytes of valid JSON, and no evidence of J anywhere in the
// queue. It fsyncs the file, renames inbox/J to pending/J without
// replacement, checks that what arrived is the file it checked, and fsyncs
// pending/ and inbox/. The file keeps its owner and mode. Entries that fail
// a check are left in inbox/ and reported as skipped.
func (q *Queue) Ingest() (published []string, skipped []Skip, err error) {
	lfd, done := q.relist(dInbox)
	ents, err := readDir(lfd, q.dirPath(dInbox))
	done()
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name, ".") {
			continue
		}
		reason, err := q.ingestOne(e.Name)
		if err != nil {
			return published, skipped, err
		}
		if reason == taken {
			continue // another ingest published it, and reports it
		}
		if reason != "" {
			skipped = append(skipped, Skip{e.Name, reason})
			continue
		}
		published = append(published, e.Name)
	}
	return published, skipped, nil
}

// taken is ingestOne's reason for an entry another ingest published (or
// is publishing) meanwhile: that ingest reports it, so this one does not,
// and a job is reported once however many ingests run at once.
const taken = "\x00taken"

// ingestOne ingests inbox/name. A non-empty reason means it was skipped
// (taken: by another ingest); an error means the queue itself failed.
func (q *Queue) ingestOne(name string) (reason string, err error) {
	ifd, pfd := q.fd[dInbox], q.fd[dPending]
	if err := ValidJobName(name); err != nil {
		return "not a job name: " + err.Error(), nil
	}
	path := q.path("inbox", name)
	fd, err := unix.Openat(ifd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ELOOP:
		return "a symlink, not a regular file", nil
	case err == unix.ENOENT:
		return taken, nil
	case err != nil:
		return "", pathErr("open", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", pathErr("stat", path, err)
	}
	switch {
	case !isReg(&st):
		return "a " + kindOf(&st) + ", not a regular file", nil
	case st.Nlink != 1 && q.halfIngested(name):
		return taken, nil
	case st.Nlink != 1:
		return fmt.Sprintf("has %d hard links", st.Nlink), nil
	case st.Size > MaxRequest:
		return fmt.Sprintf("%d bytes, more than %d", st.Size, MaxRequest), nil
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRequest+1))
	if err != nil {
		return "", pathErr("read", path, err)
	}
	if len(data) > MaxRequest {
		return fmt.Sprintf("more than %d bytes", MaxRequest), nil
	}
	if !json.Valid(data) {
		return "not valid JSON", nil
	}
	if err := fsyncFd(fd, path); err != nil {
		return "", err
	}
	step("ingest.synced")
	if err := q.nameTaken(name); err != nil {
		return "already in the queue: " + err.Error(), nil
	}
	if tried, err := q.renameNoReplace(dPending, ifd, name, pfd, name); tried {
		switch err {
		case nil:
		case unix.EEXIST:
			return "already pending", nil
		case unix.ENOENT:
			return taken, nil
		default:
			return "", pathErr("rename", path+" -> "+q.PendingPath(name), err)
		}
		step("ingest.renamed")
		// The name was checked through fd; if the entry was swapped
		// between the checks and the rename, what arrived is not what
		// was checked.
		if now, err := lstatAt(pfd, name); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
			if err := q.moveFree(dInbox, pfd, name, ifd, name); err != nil {
				return "", pathErr("rename", q.PendingPath(name)+" -> "+path, err)
			}
			return "replaced while being ingested; returned to inbox/", q.syncAll(openDir{pfd, q.dirPath(dPending)}, openDir{ifd, q.dirPath(dInbox)})
		}
	} else if reason, err := q.ingestLink(data, name, path); reason != "" || err != nil {
		return reason, err
	}
	if err := q.syncAll(openDir{pfd, q.dirPath(dPending)}, openDir{ifd, q.dirPath(dInbox)}); err != nil {
		return "", err
	}
	step("ingest.dirs-synced")
	return "", nil
}

// ingestLink is ingest's move where the filesystem lacks RENAME_NOREPLACE:
// link inbox/J to pending/J (EEXIST, atomic on the server, is the lost
// race), check that pending/J holds the bytes checked (data), then unlink
// inbox/J. Bytes, not link counts or inode numbers, tell what arrived:
// SFTP reports every file with one link, and FUSE numbers each name.
func (q *Queue) ingestLink(data []byte, name, path string) (reason string, err error) {
	ifd, pfd := q.fd[dInbox], q.fd[dPending]
	switch err := q.linkNoReplace(dPending, ifd, name, pfd, name); {
	case err == unix.EEXIST:
		if sameBytes(pfd, name, data) {
			// Another ingest linked this file (or one stopped between
			// its link and unlink): its move is completed, and it is
			// that ingest's to report.
			if unix.Unlinkat(ifd, name, 0) == nil {
				fsyncFd(ifd, q.dirPath(dInbox))
			}
			return taken, nil
		}
		return "already pending", nil
	case err == unix.ENOENT:
		return taken, nil
	case err != nil:
		return "", pathErr("link", path+" -> "+q.PendingPath(name), err)
	}
	step("ingest.renamed")
	if !sameBytes(pfd, name, data) {
		// Swapped between the checks and the link: what arrived is not
		// what was checked, and stays in inbox/ where it was.
		if err := unix.Unlinkat(pfd, name, 0); err != nil && err != unix.ENOENT {
			return "", pathErr("remove", q.PendingPath(name), err)
		}
		return "replaced while being ingested; left in inbox/", fsyncFd(pfd, q.dirPath(dPending))
	}
	if err := unix.Unlinkat(ifd, name, 0); err != nil && err != unix.ENOENT {
		return "", pathErr("remove", path, err)
	}
	return "", nil
}

// sameBytes reports whether the regular file name inside dirfd holds
// exactly data.
func sameBytes(dirfd int, name string, data []byte) bool {
	b, err := readFileAt(dirfd, name, name, MaxRequest)
	return err == nil && string(b) == string(data)
}

// halfIngested completes an ingest that stopped between its link and
// unlink (or is between them now): inbox/J is the same file as J in the
// queue (sameFile). It removes inbox/J and reports true.
func (q *Queue) halfIngested(name string) bool {
	ifd := q.fd[dInbox]
	for _, d := range []int{dPending, dDone, dFailed} {
		if q.sameFile(ifd, name, q.fd[d], name) {
			return unix.Unlinkat(ifd, name, 0) == nil && fsyncFd(ifd, q.dirPath(dInbox)) == nil
		}
	}
	if cj, err := openDirAt(q.fd[dClaimed], name); err == nil {
		defer unix.Close(cj)
		if q.sameFile(ifd, name, cj, name) {
			return unix.Unlinkat(ifd, name, 0) == nil && fsyncFd(ifd, q.dirPath(dInbox)) == nil
		}
	}
	return false
}
