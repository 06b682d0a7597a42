package lifecycle

import (
	"errors"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// ReadSecrets reads and parses agent a's secret file (secret/NAME): none
// when it has no file. Every error names the file (and its line) and
// never a value.
func ReadSecrets(root fsops.Root, a *policy.Agent) ([]policy.EnvVar, error) {
	data, err := root.ReadSecretFile(a.Name, a.Owner)
	if err != nil || data == nil {
		return nil, err
	}
	secrets, err := policy.ParseSecrets(a.Name, data)
	if err != nil {
		// The error starts with the file's name: prefixing its directory
		// names the exact file, secret/coder: line 2: ...
		return nil, errors.New(fsops.SecretDirName + "/" + err.Error())
	}
	if err := policy.SecretsCollide(a.Env, secrets); err != nil {
		return nil, errors.New(fsops.SecretDirName + "/" + a.Name + ": " + err.Error())
	}
	return secrets, nil
}

// LoadSecrets is ReadSecrets for a command that starts (or shows) a run:
// on failure it has printed one line and returns the exit status, 13
// when the caller may not read the file, 69 when it is not to be used as
// it is. A run never starts without the secrets it was given.
func LoadSecrets(e *cli.Env, root fsops.Root, a *policy.Agent) ([]policy.EnvVar, int, bool) {
	secrets, err := ReadSecrets(root, a)
	if err == nil {
		return secrets, cli.OK, true
	}
	var se *fsops.SecretError
	if errors.As(err, &se) && se.Denied {
		return nil, cli.Fail(e, cli.Denied, "agent %s: %v", a.Name, err), false
	}
	return nil, cli.Fail(e, cli.Unavailable, "agent %s: %v", a.Name, err), false
}
