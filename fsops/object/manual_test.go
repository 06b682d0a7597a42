package object

import (
	"regexp"
	"strings"
	"testing"

	"ctx/manual"
	"ctx/policy"
)

// TestManualListsEveryAgentABI keeps the grammar summary of `ctx man
// ctx-object` in step with the abi control that object check applies:
// every ABI the grammar accepts (argv-v1, what ctx runs, and
// sdk-envelope-v1, kept as data) is listed, and every value listed is
// accepted.
func TestManualListsEveryAgentABI(t *testing.T) {
	page, ok := manual.Read("ctx-object.md")
	if !ok {
		t.Fatal("no ctx-object.md")
	}
	text := strings.Join(strings.Fields(string(page)), " ")
	i := strings.Index(text, "`abi` ")
	if i < 0 {
		t.Fatal("ctx-object.md does not describe the abi control")
	}
	clause := text[i+len("`abi` "):]
	clause = clause[:strings.IndexByte(clause, ';')]
	var listed []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(clause, -1) {
		listed = append(listed, m[1])
	}
	for _, abi := range []policy.ABI{policy.ABIArgv, policy.ABISDKEnvelope} {
		if err := ValidateControl("agent", "abi", []byte(string(abi)+"\n")); err != nil {
			t.Errorf("the abi grammar refuses %s: %v", abi, err)
		}
		found := false
		for _, l := range listed {
			found = found || l == string(abi)
		}
		if !found {
			t.Errorf("ctx-object.md lists abi %q, not %s", listed, abi)
		}
	}
	for _, l := range listed {
		if err := ValidateControl("agent", "abi", []byte(l+"\n")); err != nil {
			t.Errorf("ctx-object.md lists abi %s, which object check refuses: %v", l, err)
		}
	}
	if err := ValidateControl("agent", "abi", []byte("argv-v2\n")); err == nil {
		t.Error("abi argv-v2 accepted")
	}
}
