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

// ControlError is a grammar error in one control file. It names the control
// (the file name inside NAME.d/, or "identity"), the 1-based line (0 when
// the error concerns the file as a whole, such as a missing required
// control) and the field, so a user can find and fix the exact spot. Every
// grammar error unwraps to EINVAL.
type ControlError struct {
	Control string
	Line    int
	Field   string
	Kind    ErrorKind
	Reason  string
}

func (e *ControlError) Error() string {
	var b strings.Builder
	b.WriteString(e.Control)
	if e.Line > 0 {
		b.WriteString(": line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
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
