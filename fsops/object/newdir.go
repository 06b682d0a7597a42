package object

import (
	"ctx/fsops"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File is one file of a directory written by WriteNewDir.
type File struct {
	Name string // a plain file name, no slash
	Data []byte
}

// WriteNewDir creates the directory dir holding exactly files, all at once
// and never replacing anything: the files are written and synced in a
// hidden stage directory beside dir (".<prefix>-<pid>-<n>"), which is then
// renamed to dir with renameat2(RENAME_NOREPLACE). dir must not exist; its
// parent must. On failure nothing is left at dir and the stage is removed.
func WriteNewDir(dir, prefix string, files []File) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return unavailableErr(err, "%s", dir)
	}
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if _, err := os.Lstat(abs); err == nil {
		return unavailablef("%s already exists (output directories are never replaced)", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return unavailableErr(err, "%s", dir)
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unavailableErr(&os.PathError{Op: "open", Path: parent, Err: err}, "output parent")
	}
	defer unix.Close(pfd)
	st, err := newStage(pfd, parent, "."+prefix+"-")
	if err != nil {
		return err
	}
	defer st.remove()
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || filepath.Base(f.Name) != f.Name {
			return invalidf("bad output file name %q", f.Name)
		}
		if err := writeFileAt(st.fd, f.Name, f.Data, 0o644); err != nil {
			return unavailableErr(err, "writing %s", filepath.Join(st.path, f.Name))
		}
	}
	if err := unix.Fchmod(st.fd, 0o755); err != nil {
		return unavailableErr(err, "%s", st.path)
	}
	if err := unix.Fsync(st.fd); err != nil {
		return unavailableErr(err, "syncing %s", st.path)
	}
	if err := fsops.RenameNoReplaceAt(pfd, st.name, pfd, base); err != nil {
		if err == unix.EEXIST {
			return unavailablef("%s appeared while writing (output directories are never replaced)", dir)
		}
		return unavailableErr(err, "renaming %s to %s", st.path, dir)
	}
	if err := unix.Fsync(pfd); err != nil {
		return unavailableErr(err, "syncing %s", parent)
	}
	return nil
}
