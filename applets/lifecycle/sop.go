package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"

	"ctx/policy/sandboxplan"
)

// SopPointer is the identity's sop and sop.sha256: where the sandbox shows
// the rendered system prompt and the sha256 of exactly those bytes.
func SopPointer(sop []byte) (string, string) {
	sum := sha256.Sum256(sop)
	return sandboxplan.SandboxMnt + "/SOP", hex.EncodeToString(sum[:])
}
