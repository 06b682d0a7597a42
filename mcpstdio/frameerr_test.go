package mcpstdio

import (
	"fmt"
	"testing"
)

// TestErrFrameTooLargeText keeps the spelled-out limit in step with
// MaxFrame.
func TestErrFrameTooLargeText(t *testing.T) {
	if got, want := ErrFrameTooLarge.Error(), fmt.Sprintf("frame exceeds %d bytes", MaxFrame); got != want {
		t.Errorf("ErrFrameTooLarge = %q, want %q", got, want)
	}
}
