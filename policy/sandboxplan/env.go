package sandboxplan

import (
	"strconv"
	"strings"

	"ctx/policy"
)

// RunSettings are the per-run values of the sandbox environment.
type RunSettings struct {
	Session string
	Run     string
	User    string // USER and LOGNAME; empty means the agent's name
	Shell   string // SHELL; empty means /bin/sh
	Term    string // TERM; empty means xterm-256color
	Lang    string // LANG; empty means C.UTF-8
}

// Defaults of the sandbox environment.
const (
	SandboxRoot  = "/ctx"
	SandboxHome  = "/home/agent"
	SandboxPATH  = "/ctx/bin:/usr/bin:/bin" // /ctx/bin holds ctx, tsh and ctxterm only, read-only
	DefaultShell = "/bin/sh"
	DefaultTerm  = "xterm-256color"
	DefaultLang  = "C.UTF-8"
)

// orDefault returns v unless it is empty or holds a control byte (a value
// from the caller's own environment must not smuggle a second line into
// the list), in which case def.
func orDefault(v, def string) string {
	if v == "" || policy.HasControlByte(v) {
		return def
	}
	return v
}

// SandboxEnv returns the environment an agent's program starts with, as
// ordered KEY=VALUE strings: the host-set keys
//
//	CTX_ROOT=/ctx CTX_HOME=/ctx/home/UID CTX_AGENT CTX_AGENT_SUBJECT
//	CTX_SESSION CTX_RUN_ID CTX_PATH HOME=/home/agent USER LOGNAME SHELL
//	TERM LANG PATH=/usr/bin:/bin
//
// then the agent's env control in its order. An env key that is already in
// the list (HOME, PATH, TERM...) replaces that value in place instead of
// appearing twice; CTX_* keys never reach here (ParseEnv refuses them).
// CTX_PATH joins the agent's tool path with ":".
func SandboxEnv(a *policy.Agent, r RunSettings) []string {
	user := orDefault(r.User, a.Name)
	keys := []string{"CTX_ROOT", "CTX_HOME", "CTX_AGENT", "CTX_AGENT_SUBJECT", "CTX_SESSION", "CTX_RUN_ID",
		"CTX_PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "PATH"}
	vals := []string{
		SandboxRoot,
		SandboxRoot + "/home/" + strconv.FormatUint(uint64(a.UID), 10),
		a.Name,
		a.Subject,
		r.Session,
		r.Run,
		strings.Join(a.Path, ":"),
		SandboxHome,
		user,
		user,
		orDefault(r.Shell, DefaultShell),
		orDefault(r.Term, DefaultTerm),
		orDefault(r.Lang, DefaultLang),
		SandboxPATH,
	}
	index := make(map[string]int, len(keys)+len(a.Env))
	for i, k := range keys {
		index[k] = i
	}
	for _, v := range a.Env {
		if strings.HasPrefix(v.Key, "CTX_") {
			continue // host-owned; ParseEnv refuses these, a hand-built Agent must not slip one in
		}
		if i, ok := index[v.Key]; ok {
			vals[i] = v.Value
			continue
		}
		index[v.Key] = len(keys)
		keys = append(keys, v.Key)
		vals = append(vals, v.Value)
	}
	env := make([]string, len(keys))
	for i := range keys {
		env[i] = keys[i] + "=" + vals[i]
	}
	return env
}
