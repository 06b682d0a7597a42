package policy

import "strings"

// ProcPolicyPath is the run's policy account inside its sandbox: one line
// per tool candidate, "tool:NAME execute granted" or "tool:NAME execute
// rejected LAYER", and the run's other verdicts and notes, written by its
// run host (kept current on every refused call).
const ProcPolicyPath = "/mnt/proc/policy"

// ToolRefusal finds in a run's policy account (ProcPolicyPath) the layer
// that refused tool: ok when the tool exists for the agent but a layer
// keeps it out of the sandbox, which is not the same as no such tool. The
// layer returned is one of the known layers, never text of the file's
// own: the file is the run host's, but a reader shows the layer to a
// person and must not echo bytes it did not expect.
func ToolRefusal(data []byte, tool string) (layer Layer, ok bool) {
	if ValidName(tool) != nil {
		return "", false
	}
	prefix := "tool:" + tool + " execute rejected "
	for _, line := range strings.Split(string(data), "\n") {
		rest, found := strings.CutPrefix(line, prefix)
		if !found {
			continue
		}
		for _, l := range refusalLayers {
			if rest == string(l) {
				return l, true
			}
		}
	}
	return "", false
}

// refusalLayers are the layers a tool's check can refuse by.
var refusalLayers = []Layer{LayerLinux, LayerMount, LayerPerm, LayerAgentPolicy, LayerToolPolicy, LayerTrust}
