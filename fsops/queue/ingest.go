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
	ifd := q.fd[dInbox]
	ents, err := readDir(ifd, q.dirPath(dInbox))
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
		if reason != "" {
			skipped = append(skipped, Skip{e.Name, reason})
			continue
		}
		published = append(published, e.Name)
	}
	return published, skipped, nil
}

// ingestOne ingests inbox/name. A non-empty reason means it was skipped;
// an error means the queue itself failed.
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
		return "", nil // taken meanwhile by another ingest
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
	if err := moveNoReplace(ifd, name, pfd, name); err != nil {
		switch err {
		case unix.EEXIST:
			return "already pending", nil
		case unix.ENOENT:
			return "", nil
		}
		return "", pathErr("rename", path+" -> "+q.PendingPath(name), err)
	}
	step("ingest.renamed")
	// The name was checked through fd; if the entry was swapped between
	// the checks and the rename, what arrived is not what was checked.
	if now, err := lstatAt(pfd, name); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		if err := moveNoReplace(pfd, name, ifd, name); err != nil {
			return "", pathErr("rename", q.PendingPath(name)+" -> "+path, err)
		}
		return "replaced while being ingested; returned to inbox/", q.syncAll(openDir{pfd, q.dirPath(dPending)}, openDir{ifd, q.dirPath(dInbox)})
	}
	if err := q.syncAll(openDir{pfd, q.dirPath(dPending)}, openDir{ifd, q.dirPath(dInbox)}); err != nil {
		return "", err
	}
	step("ingest.dirs-synced")
	return "", nil
}
