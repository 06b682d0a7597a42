package policy

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

const goodIdentity = "agent=coder\nlabel=user_u:agent_r:coder_t:s0\nsubject=coder_t\nuid=1000\ngid=1000\nsession=default\nrun=ctx-0123456789abcdef0123456789abcdef\n" +
	"sop=/mnt/SOP\nsop.sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"

func TestIdentityRoundTrip(t *testing.T) {
	id, err := ParseIdentity([]byte(goodIdentity))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{"coder", "user_u:agent_r:coder_t:s0", "coder_t", 1000, 1000, "default", "ctx-0123456789abcdef0123456789abcdef",
		"/mnt/SOP", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
	if id != want {
		t.Errorf("got %+v", id)
	}
	if got := string(id.Format()); got != goodIdentity {
		t.Errorf("Format = %q", got)
	}
	// Any order, CRLF and a missing final newline are accepted.
	lines := strings.Split(strings.TrimSuffix(goodIdentity, "\n"), "\n")
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	if id2, err := ParseIdentity([]byte(strings.Join(lines, "\r\n"))); err != nil || id2 != want {
		t.Errorf("reordered: %+v %v", id2, err)
	}
}

func TestIdentityRefusals(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(goodIdentity, old, new, 1) }
	tests := []struct {
		name  string
		input string
		field string
		kind  ErrorKind
	}{
		{"empty", "", "agent", KindMissing},
		{"missing run", replace("run=ctx-0123456789abcdef0123456789abcdef\n", ""), "run", KindMissing},
		{"duplicate agent", goodIdentity + "agent=other\n", "agent", KindDuplicate},
		{"unknown key", goodIdentity + "home=/x\n", "", KindInvalidValue},
		{"blank line", replace("uid=1000\n", "uid=1000\n\n"), "", KindInvalidValue},
		{"comment", "# identity\n" + goodIdentity, "", KindInvalidValue},
		{"bad agent", replace("agent=coder", "agent=../x"), "agent", KindInvalidValue},
		{"bad uid", replace("uid=1000", "uid=01000"), "uid", KindInvalidValue},
		{"bad gid", replace("gid=1000", "gid=-1"), "gid", KindInvalidValue},
		{"bad label", replace("label=user_u:agent_r:coder_t:s0", "label=a:b"), "label", KindInvalidValue},
		{"subject not the label's", replace("subject=coder_t", "subject=root_t"), "subject", KindInvalidValue},
		{"padded value", replace("session=default", "session= default"), "session", KindInvalidValue},
		{"key case", replace("agent=", "Agent="), "", KindInvalidValue},
		{"missing sop", replace("sop=/mnt/SOP\n", ""), "sop", KindMissing},
		{"missing sop digest", replace("sop.sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n", ""), "sop.sha256", KindMissing},
		{"relative sop", replace("sop=/mnt/SOP", "sop=mnt/SOP"), "sop", KindInvalidValue},
		{"unclean sop", replace("sop=/mnt/SOP", "sop=/mnt/../SOP"), "sop", KindInvalidValue},
		{"sop with a control byte", replace("sop=/mnt/SOP", "sop=/mnt/S\x1bOP"), "sop", KindInvalidValue},
		{"short digest", replace("sop.sha256=e3b0", "sop.sha256=e3b"), "sop.sha256", KindInvalidValue},
		{"upper-case digest", replace("sop.sha256=e3b0", "sop.sha256=E3b0"), "sop.sha256", KindInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseIdentity([]byte(tt.input))
			var ce *ControlError
			if !errors.As(err, &ce) || ce.Control != "identity" || ce.Field != tt.field || ce.Kind != tt.kind {
				t.Fatalf("got %v (%+v), want field %q kind %v", err, ce, tt.field, tt.kind)
			}
		})
	}
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDetectContext(t *testing.T) {
	full := env("CTX_AGENT", "coder", "CTX_SESSION", "s", "CTX_RUN_ID", "ctx-1")
	forged := env("CTX_AGENT", "architect", "CTX_SESSION", "x", "CTX_RUN_ID", "y")

	// Sandbox: the identity file wins and the environment is ignored.
	c, err := DetectContext([]byte(goodIdentity), forged)
	if err != nil || c.Source != ContextSandbox || c.Agent != "coder" || c.Session != "default" || !c.Strong() || c.Identity == nil {
		t.Errorf("sandbox: %+v %v", c, err)
	}
	// A present but broken identity is an error, never the environment.
	for _, bad := range [][]byte{{}, []byte("agent=coder\n")} {
		if c, err := DetectContext(bad, full); err == nil || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("broken identity %q: %+v %v", bad, c, err)
		}
	}
	// Environment: weak.
	c, err = DetectContext(nil, full)
	if err != nil || c.Source != ContextEnvironment || c.Strong() || c.Agent != "coder" || c.Session != "s" || c.Run != "ctx-1" || c.Identity != nil {
		t.Errorf("environment: %+v %v", c, err)
	}
	// None of the three, only empty values, or only the run id a runtime
	// gives a person's native call: no context.
	for _, getenv := range []func(string) string{
		env(),
		env("CTX_AGENT", "", "CTX_SESSION", "", "CTX_RUN_ID", ""),
		env("CTX_RUN_ID", "r1"),
	} {
		c, err := DetectContext(nil, getenv)
		if err != nil || !reflect.DeepEqual(c, AgentContext{Source: ContextNone}) {
			t.Errorf("no environment: %+v %v", c, err)
		}
	}
	// Some but not all: fail closed, naming exactly the missing ones.
	for _, tc := range []struct {
		getenv func(string) string
		want   string
	}{
		{env("CTX_AGENT", "coder"), "CTX_SESSION and CTX_RUN_ID are not set (with CTX_AGENT set)"},
		{env("CTX_AGENT", "coder", "CTX_SESSION", "s"), "CTX_RUN_ID is not set (with CTX_AGENT and CTX_SESSION set)"},
		{env("CTX_SESSION", "s", "CTX_RUN_ID", "r"), "CTX_AGENT is not set (with CTX_SESSION and CTX_RUN_ID set)"},
		{env("CTX_AGENT", "", "CTX_SESSION", "s", "CTX_RUN_ID", "r"), "CTX_AGENT is not set"},
		{env("CTX_SESSION", "s"), "CTX_AGENT and CTX_RUN_ID are not set (with CTX_SESSION set)"},
	} {
		c, err := DetectContext(nil, tc.getenv)
		var pe *PartialContextError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "partial agent environment: "+tc.want) || c.Source != "" {
			t.Errorf("partial environment: %+v %v, want an error containing %q", c, err, tc.want)
		}
	}
	// The identity file of a sandbox makes the environment irrelevant,
	// partial or not.
	if c, err := DetectContext([]byte(goodIdentity), env("CTX_AGENT", "x")); err != nil || c.Source != ContextSandbox {
		t.Errorf("sandbox with a partial environment: %+v %v", c, err)
	}
	// Set but invalid: an error naming the variable.
	_, err = DetectContext(nil, env("CTX_AGENT", "../etc", "CTX_SESSION", "s", "CTX_RUN_ID", "r"))
	if err == nil || !strings.Contains(err.Error(), "CTX_AGENT") {
		t.Errorf("invalid CTX_AGENT: %v", err)
	}
}
