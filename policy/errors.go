package policy

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ErrorKind classifies a grammar error so callers and tests can tell errors
// apart without matching message text.
type ErrorKind uint8

const (
	KindFieldCount        ErrorKind = iota + 1 // wrong number of fields on a line
	KindExpectedAllow                          // a policy line not starting with "allow"
	KindInvalidName                            // a name outside the object-name grammar
	KindInvalidObject                          // a policy object that is not CLASS:NAME
	KindUnknownClass                           // a policy class outside the fixed set
	KindUnknownPermission                      // a permission outside its class's fixed set
	KindInvalidPath                            // not an absolute canonical path
	KindInvalidMode                            // a mount mode other than ro or rw
	KindInvalidOption                          // a bad mount option list
	KindInvalidValue                           // any other malformed value
	KindDuplicate                              // a value or key given twice
	KindExtraLine                              // a second line in a one-line control
	KindMissingNewline                         // a control that requires its final newline lacks it
	KindMissing                                // a required control or key is absent
	KindForbidden                              // a well-formed value that is reserved or refused
)

var kindNames = [...]string{
	KindFieldCount:        "wrong field count",
	KindExpectedAllow:     "expected allow",
	KindInvalidName:       "invalid name",
	KindInvalidObject:     "invalid object",
	KindUnknownClass:      "unknown class",
	KindUnknownPermission: "unknown permission",
	KindInvalidPath:       "invalid path",
	KindInvalidMode:       "invalid mode",
	KindInvalidOption:     "invalid option",
	KindInvalidValue:      "invalid value",
	KindDuplicate:         "duplicate",
	KindExtraLine:         "extra line",
	KindMissingNewline:    "missing final newline",
	KindMissing:           "missing",
	KindForbidden:         "forbidden",
}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ControlError is a grammar error in what a person wrote for policy to
// parse. In a control file it names the control (the file name inside
// NAME.d/, or "identity"), the 1-based line (0 when the error concerns the
// file as a whole, such as a missing required control) and the field, so
// a user can find and fix the exact spot. In a tsh data file (tsh.d/config,
// .tshrc) the control is empty, the caller names the file; in a request
// (an object or permission as a command names it) only the reason is
// set. Every grammar error unwraps to EINVAL.
type ControlError struct {
	Control string
	Line    int
	Field   string
	Kind    ErrorKind
	Reason  string
}

func (e *ControlError) Error() string {
	var b strings.Builder
	for _, part := range []string{e.Control, lineName(e.Line), e.Field} {
		if part != "" {
			b.WriteString(part)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Reason)
	return b.String()
}

// In is the error with file in place of the control: what a person who
// named the file by its path reads.
func (e *ControlError) In(file string) string {
	named := *e
	named.Control = file
	return named.Error()
}

// lineName is "line N" for a 1-based line, empty for 0.
func lineName(line int) string {
	if line <= 0 {
		return ""
	}
	return "line " + strconv.Itoa(line)
}

// Unwrap makes errors.Is(err, syscall.EINVAL) true for every grammar error.
func (e *ControlError) Unwrap() error { return syscall.EINVAL }

func controlErr(control string, line int, field string, kind ErrorKind, format string, args ...any) *ControlError {
	return &ControlError{Control: control, Line: line, Field: field, Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// maxQuoted bounds how much of an offending value an error message repeats:
// enough to recognise it, never a whole 64 KiB line.
const maxQuoted = 80

// quote renders an untrusted value for an error message: Go-quoted, so
// control bytes and escape sequences cannot reach a terminal, and truncated.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// maxQuotedPath bounds a path an explanation repeats: PATH_MAX, so a path
// of a deep tree (a long TMPDIR) is shown whole, not cut at maxQuoted.
const maxQuotedPath = 4096

// quotePath renders a path for a message as quote does, whole up to
// PATH_MAX.
func quotePath(s string) string {
	if len(s) > maxQuotedPath {
		return strconv.Quote(s[:maxQuotedPath]) + "..."
	}
	return strconv.Quote(s)
}

// nameReason returns the reason ValidName (or a sibling) gave.
func nameReason(err error) string {
	if ne, ok := err.(*NameError); ok {
		return ne.Reason
	}
	return err.Error()
}

// syntaxErr is a grammar error the caller places: at a line of a tsh data
// file (0 for the file as a whole), or in a request (line 0).
func syntaxErr(line int, kind ErrorKind, format string, args ...any) *ControlError {
	return controlErr("", line, "", kind, format, args...)
}
