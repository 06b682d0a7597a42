package ctx

import (
	"bytes"
	"fmt"
	"os"

	"golang.org/x/term"

	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/policy"
	"ctx/ptyterm"
)

// `ctx secret set|list|rm`: an agent's secrets (API keys), kept in
// secret/NAME (fsops/agentsecret.go) and given to its program in the
// environment at the start of each run. A value is read from standard
// input, never from the command line (ps shows every process's
// arguments), and never printed.

// RunSecretSet is `ctx secret set [--root DIR] AGENT VAR`: the value from
// standard input (on a terminal, asked for without echo; else one line,
// its newline dropped) replaces VAR's or is added.
func RunSecretSet(e *cli.Env, args []string) int {
	root, a, key, code, ok := secretArgs(e, args, 2)
	if !ok {
		return code
	}
	if err := policy.SecretsCollide(a.Env, []policy.EnvVar{{Key: key}}); err != nil {
		return cli.Fail(e, cli.Usage, "agent %s: %v", a.Name, err)
	}
	// The file as it is, before the value is asked for: a caller who may
	// not change it is told so before typing a key.
	vars, code, ok := lifecycle.LoadSecrets(e, root, a)
	if !ok {
		return code
	}
	value, err := readSecretValue(e, a.Name, key)
	if err != nil {
		return cli.Fail(e, cli.Usage, "%s: %v", key, err)
	}
	replaced := false
	for i := range vars {
		if vars[i].Key == key {
			vars[i].Value, replaced = value, true
		}
	}
	if !replaced {
		vars = append(vars, policy.EnvVar{Key: key, Value: value})
	}
	return writeSecrets(e, root, a, vars)
}

// RunSecretList is `ctx secret list [--root DIR] AGENT`: the names of the
// agent's secrets, one a line, in the file's order; never a value.
func RunSecretList(e *cli.Env, args []string) int {
	root, a, _, code, ok := secretArgs(e, args, 1)
	if !ok {
		return code
	}
	vars, code, ok := lifecycle.LoadSecrets(e, root, a)
	if !ok {
		return code
	}
	for _, v := range vars {
		fmt.Fprintln(e.Stdout, v.Key)
	}
	return cli.OK
}

// RunSecretRm is `ctx secret rm [--root DIR] AGENT VAR`: VAR's secret
// removed; the file goes with the last one.
func RunSecretRm(e *cli.Env, args []string) int {
	root, a, key, code, ok := secretArgs(e, args, 2)
	if !ok {
		return code
	}
	vars, code, ok := lifecycle.LoadSecrets(e, root, a)
	if !ok {
		return code
	}
	kept := vars[:0]
	for _, v := range vars {
		if v.Key != key {
			kept = append(kept, v)
		}
	}
	if len(kept) == len(vars) {
		return cli.Fail(e, cli.Failure, "agent %s has no secret %s", a.Name, key)
	}
	return writeSecrets(e, root, a, kept)
}

// secretArgs parses `[--root DIR] AGENT [VAR]` (n positionals) and loads
// the agent: a secret is only ever set for an agent that exists.
func secretArgs(e *cli.Env, args []string, n int) (fsops.Root, *policy.Agent, string, int, bool) {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, n, n)
	if !ok {
		return fsops.Root{}, nil, "", code, false
	}
	key := ""
	if n == 2 {
		key = pos[1]
		if !policy.ValidSecretKey(key) {
			return fsops.Root{}, nil, "", cli.UsageError(e, "VAR %s is not a variable name: [A-Z_][A-Z0-9_]*, at most %d bytes", cli.Escape(key), policy.MaxSecretKeyLen), false
		}
		if why := policy.SecretKeyRefused(key); why != "" {
			return fsops.Root{}, nil, "", cli.UsageError(e, "VAR %s: %s", key, why), false
		}
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	a, code, ok := lifecycle.LoadAgent(e, root, pos[0])
	return root, a, key, code, ok
}

// writeSecrets replaces the agent's secret file with vars (none: the file
// is removed). A root caller gives the file to the agent's owner, who
// starts the agent and whose run host reads it.
func writeSecrets(e *cli.Env, root fsops.Root, a *policy.Agent, vars []policy.EnvVar) int {
	uid := -1
	if os.Geteuid() == 0 {
		uid = int(a.Owner)
	}
	if err := root.WriteSecretFile(a.Name, policy.FormatSecrets(vars), uid); err != nil {
		return cli.FailErr(e, cli.Failure, err)
	}
	return cli.OK
}

// readSecretValue reads one value: asked for without echo when standard
// input is a terminal, else standard input's first line (at most
// fsops.ControlLimit bytes, one line only, its newline dropped). It is
// checked as the file's grammar checks it; the error never shows it.
func readSecretValue(e *cli.Env, agent, key string) (string, error) {
	var data []byte
	if f, ok := e.Stdin.(*os.File); ok && ptyterm.IsTerminal(f) {
		fmt.Fprintf(e.Stderr, "%s for agent %s (not shown): ", key, agent)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.Stderr)
		if err != nil {
			return "", err
		}
		data = b
	} else {
		b, err := fsops.ReadLimited(e.Stdin, "standard input", fsops.ControlLimit)
		if err != nil {
			return "", err
		}
		data = bytes.TrimSuffix(b, []byte{'\n'})
		data = bytes.TrimSuffix(data, []byte{'\r'})
	}
	if bytes.IndexByte(data, '\n') >= 0 {
		return "", fmt.Errorf("the value on standard input is more than one line (the value is not shown)")
	}
	if why := policy.CheckSecretValue(string(data)); why != "" {
		return "", fmt.Errorf("the value %s (the value is not shown)", why)
	}
	return string(data), nil
}
