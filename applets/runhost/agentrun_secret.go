package runhost

import (
	"path/filepath"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

// The run's secret (fsops/runsecret.go): made with the run directory,
// kept in the caller's runtime directory beside (never inside) the run
// directories, and checked to be out of the sandbox's reach before the
// run starts.

// makeSecret makes the run's secret and writes its file, named after the
// run directory, in the runtime directory's secret/.
func (r *AgentRun) makeSecret() error {
	secret, err := fsops.NewRunSecret()
	if err != nil {
		return err
	}
	path := fsops.RunSecretPath(r.runtime, filepath.Base(r.runDir))
	if err := fsops.WriteRunSecret(path, secret); err != nil {
		return err
	}
	r.secret, r.secretPath = secret, path
	return nil
}

// checkSecretHidden refuses a plan that would show the agent the run's
// secret, or the terminal's copy of it: a mount (or, in iso landlock, a
// Landlock rule) of the runtime directory or a directory above it.
func (r *AgentRun) checkSecretHidden(e *cli.Env) (int, bool) {
	places := []string{fsops.RunSecretDir(r.runtime)}
	if dir, err := fsops.TerminalDir(r.callerUID); err == nil {
		places = append(places, dir)
	}
	for _, p := range places {
		if what := sandboxplan.PlanExposes(r.plan, p); what != "" {
			return cli.Fail(e, cli.Unavailable, "agent %s: %s would show the agent %s, where the run's secret is kept (ctx man sandbox); mount a directory below it instead",
				r.Agent.Name, what, p), false
		}
	}
	// The agents' secrets (API keys) too, every agent's: a mount of the
	// tree, or of a directory above it, would show them.
	if what := sandboxplan.PlanExposes(r.plan, r.Root.SecretDir()); what != "" {
		return cli.Fail(e, cli.Unavailable, "agent %s: %s would show the agent %s, where the agents' secrets are kept (ctx man ctx-secret); mount a directory below it instead",
			r.Agent.Name, what, r.Root.SecretDir()), false
	}
	return 0, true
}
