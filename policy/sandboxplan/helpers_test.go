package sandboxplan

import (
	"testing"

	"ctx/policy"
)

// The agents these tests plan for, as policy's own tests make them.

func coderControls() map[string][]byte {
	return map[string][]byte{
		"label":  []byte("user_u:agent_r:coder_t:s0\n"),
		"perm":   []byte("rwx\n"),
		"uid":    []byte("1000\n"),
		"gid":    []byte("1000\n"),
		"policy": []byte("allow coder_t tool:fs.read execute\nallow coder_t tool:shell.exec execute\n"),
	}
}

func withControls(base map[string][]byte, kv ...string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

func mustAgent(t *testing.T, name string, c map[string][]byte) *policy.Agent {
	t.Helper()
	a, err := policy.ParseAgent(name, c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
