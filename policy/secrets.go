package policy

import (
	"bytes"
	"fmt"
	"strings"
)

// An agent's secret file (secret/NAME at the top of the tree) holds what a
// person gives the agent's program in its environment and nowhere else:
// API keys above all. One VAR=value per line. The values are never shown:
// no error here repeats a value, nor a part of a line that may be one (a
// key that is not a variable name may be a pasted key); a valid variable
// name is not a secret and is named.

// Bounds of a secret file, beside the file's own (fsops.ControlLimit).
const (
	MaxSecrets      = 256 // variables in one file
	MaxSecretKeyLen = 128 // bytes of a variable's name
)

// SecretPlaceholder stands for a secret's value wherever ctx shows an
// environment (ctx agent env, --plan): VAR=<secret>.
const SecretPlaceholder = "<secret>"

// ValidSecretKey reports whether k is a secret's variable name:
// [A-Z_][A-Z0-9_]*, at most MaxSecretKeyLen bytes.
func ValidSecretKey(k string) bool {
	if k == "" || len(k) > MaxSecretKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != '_' && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// hostEnvKeys are the variables ctx sets in every run's environment
// (SandboxEnv, and TMPDIR in iso landlock).
var hostEnvKeys = []string{"HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "PATH", "TMPDIR"}

// proxyEnvKeys are the variables of the run's egress proxy (DESIGN §17);
// their lower-case forms are no secret names anyway.
var proxyEnvKeys = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"}

// SecretKeyRefused says why ctx refuses k (a valid variable name) as a
// secret's name, or "" when it takes it: the variables ctx itself sets for
// a run are ctx's, and a secret must not replace them.
func SecretKeyRefused(k string) string {
	switch {
	case strings.HasPrefix(k, "CTX_"):
		return "CTX_* variables are set by ctx only"
	case k == "GIT_CONFIG_COUNT" || strings.HasPrefix(k, "GIT_CONFIG_KEY_") || strings.HasPrefix(k, "GIT_CONFIG_VALUE_"):
		return "GIT_CONFIG_* variables are set by ctx (git's safe.directory for the workspace)"
	}
	for _, h := range hostEnvKeys {
		if k == h {
			return k + " is set by ctx for every run (the env control may change it, a secret may not)"
		}
	}
	for _, p := range proxyEnvKeys {
		if k == p {
			return k + " is set by ctx: it names the run's egress proxy"
		}
	}
	return ""
}

// ParseSecrets parses the secret file named name: one VAR=value per line,
// split at the first "=". VAR is ValidSecretKey and not SecretKeyRefused,
// given once; value is one line of text, not empty, without control bytes
// (NUL included) and without a blank at either end (a pasted key's stray
// space). No comments, no blank lines, no quoting or expansion. A CR
// before the LF is dropped, as in every control.
func ParseSecrets(name string, data []byte) ([]EnvVar, error) {
	var vars []EnvVar
	seen := map[string]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		key, value, ok := bytes.Cut(line, []byte{'='})
		k := string(key)
		if !ok {
			return controlErr(name, num, "", KindInvalidValue, "not VAR=value (the line is not shown: it may be a value)")
		}
		if !ValidSecretKey(k) {
			return controlErr(name, num, "key", KindInvalidName, "%s", badSecretKey(k))
		}
		if why := SecretKeyRefused(k); why != "" {
			return controlErr(name, num, "key", KindForbidden, "%s: %s", k, why)
		}
		if why := badSecretValue(value); why != "" {
			return controlErr(name, num, "value", KindInvalidValue, "value of %s %s", k, why)
		}
		if first, dup := seen[k]; dup {
			return controlErr(name, num, "key", KindDuplicate, "%s already set on line %d", k, first)
		}
		if len(vars) == MaxSecrets {
			return controlErr(name, num, "", KindInvalidValue, "more than %d secrets", MaxSecrets)
		}
		seen[k] = num
		vars = append(vars, EnvVar{k, string(value)})
		return nil
	})
	return vars, err
}

// badSecretKey explains a key that is not a variable name without
// repeating it.
func badSecretKey(k string) string {
	const grammar = "the name is not [A-Z_][A-Z0-9_]* of at most 128 bytes"
	switch {
	case k == "":
		return "the name before = is empty"
	case len(k) <= MaxSecretKeyLen && ValidEnvKey(k):
		return grammar + " (names are upper case here)"
	}
	return grammar + " (not shown: it may be a value)"
}

// badSecretValue says what is wrong with a secret's value, or "".
func badSecretValue(v []byte) string {
	switch {
	case len(v) == 0:
		return "is empty"
	case v[0] == ' ' || v[len(v)-1] == ' ':
		return "begins or ends with a blank"
	case HasControlByte(string(v)):
		return "holds a control byte (a value is one line of text)"
	}
	return ""
}

// FormatSecrets renders a secret file.
func FormatSecrets(vars []EnvVar) []byte {
	var b bytes.Buffer
	for _, v := range vars {
		b.WriteString(v.Key + "=" + v.Value + "\n")
	}
	return b.Bytes()
}

// CheckSecretValue checks one value as ParseSecrets would, for a command
// that sets it: the reason, or "".
func CheckSecretValue(v string) string { return badSecretValue([]byte(v)) }

// SecretsCollide refuses secrets one of which the agent's env control
// sets too: which of the two the program would get is no choice to make
// silently.
func SecretsCollide(env []EnvVar, secrets []EnvVar) error {
	for _, s := range secrets {
		for _, v := range env {
			if v.Key == s.Key {
				return fmt.Errorf("%s is set both by the agent's env control and by its secret file; remove it from one", s.Key)
			}
		}
	}
	return nil
}

// WithSecrets returns env (a run's environment, KEY=VALUE strings) with
// the secrets appended in their order, each value replaced by
// SecretPlaceholder when shown is set (an environment printed, never
// run).
func WithSecrets(env []string, secrets []EnvVar, shown bool) []string {
	if len(secrets) == 0 {
		return env
	}
	out := append(make([]string, 0, len(env)+len(secrets)), env...)
	for _, s := range secrets {
		v := s.Value
		if shown {
			v = SecretPlaceholder
		}
		out = append(out, s.Key+"="+v)
	}
	return out
}

// SecretFileProblem says why a secret file is not to be read as an
// agent's secrets, or "": it must be a regular file that only its owner
// may read or write (mode 0600 or less), owned by root, the tree owner or
// the agent's owner (who starts the agent; root hands an agent's secrets
// to the user it hands the agent to).
func SecretFileProblem(uid, perm uint32, regular bool, treeOwner, agentOwner uint32) string {
	switch {
	case !regular:
		return "not a regular file"
	case perm&0o077 != 0:
		return fmt.Sprintf("mode %04o lets other users read or change it (want 0600)", perm&0o7777)
	case uid != 0 && uid != treeOwner && uid != agentOwner:
		return fmt.Sprintf("owned by uid %d, neither root, the tree owner (uid %d) nor the agent's owner (uid %d)", uid, treeOwner, agentOwner)
	}
	return ""
}

// SecretDirProblem says why the tree's secret directory is not to be
// trusted, or "": owned by root or the tree owner, and neither listed nor
// changed by anyone else (0700, or 0711: a user to whom root handed an
// agent reaches that agent's file by its name, and lists nothing).
func SecretDirProblem(uid, perm uint32, treeOwner uint32) string {
	switch {
	case perm&0o066 != 0:
		return fmt.Sprintf("mode %04o lets other users list or change it (want 0711 or 0700)", perm&0o7777)
	case uid != 0 && uid != treeOwner:
		return fmt.Sprintf("owned by uid %d, neither root nor the tree owner (uid %d)", uid, treeOwner)
	}
	return ""
}
