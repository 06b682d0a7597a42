package sandboxplan

import (
	"reflect"
	"strings"
	"testing"

	"ctx/policy"
)

func TestSandboxEnv(t *testing.T) {
	a := mustAgent(t, "coder", withControls(coderControls(),
		"env", "EDITOR=vi\nPATH=/opt/bin:/usr/bin:/bin\nTERM=dumb\nZ=$HOME\n",
		"path", "/ctx/tool\n/ctx/shared/p/tool\n"))
	got := SandboxEnv(a, RunSettings{Session: "default", Run: "ctx-1", Lang: "bad\nLANG"})
	want := []string{
		"CTX_ROOT=/ctx",
		"CTX_HOME=/ctx/home/1000",
		"CTX_AGENT=coder",
		"CTX_AGENT_SUBJECT=coder_t",
		"CTX_SESSION=default",
		"CTX_RUN_ID=ctx-1",
		"CTX_PATH=/ctx/tool:/ctx/shared/p/tool",
		"HOME=/home/agent",
		"USER=coder",
		"LOGNAME=coder",
		"SHELL=/bin/sh",
		"TERM=dumb",
		"LANG=C.UTF-8",
		"PATH=/opt/bin:/usr/bin:/bin",
		"EDITOR=vi",
		"Z=$HOME",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A hand-built agent cannot override host keys.
	a.Env = append(a.Env, policy.EnvVar{Key: "CTX_AGENT", Value: "architect"})
	for _, kv := range SandboxEnv(a, RunSettings{User: "u", Term: "xterm", Shell: "/bin/bash"}) {
		if kv == "CTX_AGENT=architect" {
			t.Error("CTX_AGENT overridden")
		}
	}
}
