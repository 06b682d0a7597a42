// Package object implements the executable-object lifecycle of the /ctx
// tree: manifests (cortexfs.object/v1 and /v2), their control grammars,
// `ctx object check|install|inspect|uninstall`, and new-directory
// publication for manifest candidates.
//
// Install protocol (new objects only; nothing is ever overwritten):
//
//  1. validate the manifest and the artifact (regular file reached without
//     symlinks, an execute bit, the declared SHA-256) before touching the
//     target class directory;
//  2. create a stage `.cortexfs-install-<pid>-<n>` (0700) inside the class
//     directory, so every later rename stays on one filesystem;
//  3. write `control/` (controls, runtime files, hooks dirs) and
//     `executable` (copied while hashing), then the install receipt that
//     records both inodes; fsync files, directories and the stage;
//  4. publish with renameat2(RENAME_NOREPLACE): the control directory
//     first, the executable last, because the executable is what CTX_PATH
//     lookup finds: until it appears the object does not exist;
//  5. on any failure after step 4 began, rename what was published back
//     into the stage (only when its inode is still ours) and remove the
//     stage, so nothing is left half-published.
package object

import (
	"errors"
	"fmt"
)

// Kind classifies a lifecycle failure; it decides the exit status.
type Kind int

const (
	// Invalid input: bad manifest, control, artifact or arguments (exit 2).
	Invalid Kind = iota + 1
	// Unavailable: conflicts, missing or unmanaged objects, I/O failures
	// while staging or publishing (exit 69).
	Unavailable
)

// Error is a lifecycle failure with its kind.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // the underlying cause, when there is one
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func invalidf(format string, args ...any) error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, args...)}
}

func unavailablef(format string, args ...any) error {
	return &Error{Kind: Unavailable, Msg: fmt.Sprintf(format, args...)}
}

func unavailableErr(err error, format string, args ...any) error {
	return &Error{Kind: Unavailable, Msg: fmt.Sprintf(format, args...), Err: err}
}

func invalidErr(err error, format string, args ...any) error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, args...), Err: err}
}

// KindOf returns the kind of err; errors that are not *Error count as
// Unavailable (an unexpected I/O failure, never the caller's input).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Unavailable
}
