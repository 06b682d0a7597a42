package policy

import (
	"errors"
	"syscall"
	"testing"
)

// TestControlErrorText: one type for every grammar error, placed as far as
// it is known: a control file's line and field, a tsh file's line (the
// caller names the file), a request's reason alone. In puts a file's path
// where the control's name was.
func TestControlErrorText(t *testing.T) {
	for _, tc := range []struct {
		err        *ControlError
		text, file string
	}{
		{controlErr("mount", 3, "mode", KindInvalidMode, "bad %s", "x"), "mount: line 3: mode: bad x", "/t/mount: line 3: mode: bad x"},
		{controlErr("policy", 0, "", KindMissing, "empty"), "policy: empty", "/t/policy: empty"},
		{syntaxErr(2, KindDuplicate, "twice"), "line 2: twice", "/t/x: line 2: twice"},
		{syntaxErr(0, KindUnknownClass, "unknown class %q", "c"), `unknown class "c"`, `/t/x: unknown class "c"`},
	} {
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("Error() = %q, want %q", got, tc.text)
		}
		file := "/t/x"
		if tc.err.Control != "" {
			file = "/t/" + tc.err.Control
		}
		if got := tc.err.In(file); got != tc.file {
			t.Errorf("In(%q) = %q, want %q", file, got, tc.file)
		}
		if !errors.Is(tc.err, syscall.EINVAL) {
			t.Errorf("%q does not unwrap to EINVAL", tc.text)
		}
	}
}
