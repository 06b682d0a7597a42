package policy

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// IdentityPath is where ctx agent start puts the identity of a sandboxed
// run, on a read-only mount the agent cannot change.
const IdentityPath = "/mnt/proc/identity"

// Identity is the content of IdentityPath.
type Identity struct {
	Agent   string
	Label   string
	Subject string // must be the subject Label derives
	UID     uint32
	GID     uint32
	Session string
	Run     string
	// SOP is where the run shows the agent's system prompt (/mnt/SOP in a
	// sandbox) and SOPSHA256 the sha256 of those bytes: the pointer and
	// digest agentrc's labels carry (ai.agentrc.sop, ai.agentrc.sop.sha256),
	// so a program can check the prompt it loads is the one the run host
	// rendered.
	SOP       string
	SOPSHA256 string
}

// identityKeys is the canonical key order of the identity file.
var identityKeys = []string{"agent", "label", "subject", "uid", "gid", "session", "run", "sop", "sop.sha256"}

// Format renders the identity file: one KEY=VALUE line per key in the
// order agent, label, subject, uid, gid, session, run, sop, sop.sha256.
func (id Identity) Format() []byte {
	vals := []string{id.Agent, id.Label, id.Subject, strconv.FormatUint(uint64(id.UID), 10),
		strconv.FormatUint(uint64(id.GID), 10), id.Session, id.Run, id.SOP, id.SOPSHA256}
	var b bytes.Buffer
	for i, k := range identityKeys {
		b.WriteString(k + "=" + vals[i] + "\n")
	}
	return b.Bytes()
}

// ParseIdentity parses an identity file: KEY=VALUE lines, split at the
// first "=", holding each of agent, label, subject, uid, gid, session, run,
// sop and sop.sha256 exactly once, in any order, and nothing else (no blank
// lines, no unknown keys). agent, session and run are object names, label
// follows the label grammar and subject must be the subject it derives, uid
// and gid are canonical decimal ids, sop an absolute clean path without
// control bytes, sop.sha256 64 lowercase hex digits. Errors name the
// control "identity".
func ParseIdentity(data []byte) (Identity, error) {
	var id Identity
	seen := map[string]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		key, val, ok := strings.Cut(string(line), "=")
		if !ok {
			return controlErr("identity", num, "", KindInvalidValue, "%s is not KEY=VALUE", quote(string(line)))
		}
		known := false
		for _, k := range identityKeys {
			known = known || k == key
		}
		if !known {
			return controlErr("identity", num, "", KindInvalidValue, "unknown key %s", quote(key))
		}
		if first, dup := seen[key]; dup {
			return controlErr("identity", num, key, KindDuplicate, "key %s already on line %d", quote(key), first)
		}
		seen[key] = num
		if reason := id.set(key, val); reason != "" {
			return controlErr("identity", num, key, KindInvalidValue, "%s", reason)
		}
		return nil
	})
	if err != nil {
		return Identity{}, err
	}
	for _, k := range identityKeys {
		if _, ok := seen[k]; !ok {
			return Identity{}, controlErr("identity", 0, k, KindMissing, "key %s is missing", k)
		}
	}
	if subject, _ := LabelSubject(id.Label); subject != id.Subject {
		return Identity{}, controlErr("identity", seen["subject"], "subject", KindInvalidValue,
			"subject %s is not %s, the subject of label %s", quote(id.Subject), quote(subject), quote(id.Label))
	}
	return id, nil
}

// set parses the value of identity key into id: "" when it is valid, else
// why not.
func (id *Identity) set(key, val string) string {
	switch key {
	case "agent", "session", "run":
		if err := ValidName(val); err != nil {
			return quote(val) + ": " + nameReason(err)
		}
		switch key {
		case "agent":
			id.Agent = val
		case "session":
			id.Session = val
		default:
			id.Run = val
		}
	case "label":
		if _, err := LabelSubject(val); err != nil {
			return err.(*ControlError).Reason
		}
		id.Label = val
	case "subject":
		if err := ValidName(val); err != nil {
			return quote(val) + ": " + nameReason(err)
		}
		id.Subject = val
	case "sop":
		if !strings.HasPrefix(val, "/") || path.Clean(val) != val || HasControlByte(val) {
			return quote(val) + " is not an absolute clean path"
		}
		id.SOP = val
	case "sop.sha256":
		if !IsLowerHex(val, 64) {
			return quote(val) + " is not 64 lowercase hex digits"
		}
		id.SOPSHA256 = val
	case "uid", "gid":
		n, reason, ok := parseID(val)
		if !ok {
			return reason
		}
		if key == "uid" {
			id.UID = n
		} else {
			id.GID = n
		}
	}
	return ""
}

// IsLowerHex reports whether s is exactly n lowercase hex digits.
func IsLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ContextSource says where an agent context came from, and so how far it
// can be trusted.
type ContextSource string

const (
	// ContextNone: the process is not running as an agent.
	ContextNone ContextSource = "none"
	// ContextSandbox: the identity file of a ctx sandbox is present. The
	// agent cannot change it (read-only mount, no capabilities,
	// no_new_privs), so it is authoritative.
	ContextSandbox ContextSource = "sandbox"
	// ContextEnvironment: CTX_AGENT, CTX_SESSION and CTX_RUN_ID are set, as
	// ctx agent start does with iso=shared. Weak: any process of the same
	// uid can set these variables and claim to be any agent of that uid.
	ContextEnvironment ContextSource = "environment"
)

// AgentContext is the answer to "does this process run as an agent?".
type AgentContext struct {
	Source   ContextSource
	Agent    string
	Session  string
	Run      string
	Identity *Identity // the parsed identity file, in sandbox mode only
}

// Strong reports whether the context cannot be forged by the process
// itself (sandbox mode).
func (c AgentContext) Strong() bool { return c.Source == ContextSandbox }

// DetectContext decides whether the current process runs as an agent.
// identity is the content of IdentityPath, nil when the file is absent; the
// caller reads it. When it is present the context is the sandbox's and the
// environment is ignored entirely; a present but malformed identity is an
// error, never a fall back to the environment. Otherwise the context comes
// from CTX_AGENT, CTX_SESSION and CTX_RUN_ID when all three are set (each
// must then be a valid name); with none of them there is no context.
//
// CTX_AGENT or CTX_SESSION without all three is an error naming the
// missing ones, for every caller alike: ctx agent start always sets all
// three, so a partial set is a broken or tampered environment, and
// treating it as "no agent" would make the same process an agent to one
// applet and a person to another. CTX_RUN_ID alone claims no agent: it is
// the run id a runtime gives a person's native tool call for its frames
// (ctx man ctx.tool), so it alone is no context.
func DetectContext(identity []byte, getenv func(string) string) (AgentContext, error) {
	if identity != nil {
		id, err := ParseIdentity(identity)
		if err != nil {
			return AgentContext{}, err
		}
		return AgentContext{Source: ContextSandbox, Agent: id.Agent, Session: id.Session, Run: id.Run, Identity: &id}, nil
	}
	vars := [3]string{"CTX_AGENT", "CTX_SESSION", "CTX_RUN_ID"}
	var vals [3]string
	var set, missing []string
	for i, k := range vars {
		vals[i] = getenv(k)
		if vals[i] == "" {
			missing = append(missing, k)
		} else {
			set = append(set, k)
		}
	}
	switch {
	case vals[0] == "" && vals[1] == "":
		return AgentContext{Source: ContextNone}, nil
	case len(missing) > 0:
		return AgentContext{}, &PartialContextError{Set: set, Missing: missing}
	}
	for i, k := range vars {
		if err := ValidName(vals[i]); err != nil {
			return AgentContext{}, controlErr("environment", 0, k, KindInvalidName, "%s %s: %s", k, quote(vals[i]), nameReason(err))
		}
	}
	return AgentContext{Source: ContextEnvironment, Agent: vals[0], Session: vals[1], Run: vals[2]}, nil
}

// PartialContextError is a partial agent environment: some of CTX_AGENT,
// CTX_SESSION and CTX_RUN_ID set, the others not.
type PartialContextError struct {
	Set, Missing []string
}

func (e *PartialContextError) Error() string {
	verb := "is"
	if len(e.Missing) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("partial agent environment: %s %s not set (with %s set); an agent context needs CTX_AGENT, CTX_SESSION and CTX_RUN_ID together",
		strings.Join(e.Missing, " and "), verb, strings.Join(e.Set, " and "))
}
