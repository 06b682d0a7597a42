package ctx

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/policy"
)

// checkSecrets reports the tree's secret directory and each agent's secret
// file (ctx man ctx-secret): one that other users may read or change, or
// that a stranger owns, which a start refuses; a file for no agent, which
// an agent made later with that name would get; a file whose grammar is
// wrong. It never shows a value: a grammar error names the line and the
// variable, never what follows its =.
func checkSecrets(root fsops.Root, fixes map[fsops.Finding]string) []fsops.Finding {
	dir, entries, err := root.InspectSecrets()
	if dir == nil && err == nil {
		return nil
	}
	path := root.SecretDir()
	q := fsops.ShellQuote(path)
	owner, oerr := root.TreeOwner()
	if err != nil && dir == nil || oerr != nil {
		return []fsops.Finding{{Status: "invalid", Rel: fsops.SecretDirName, Detail: cli.Escape(errors.Join(err, oerr).Error())}}
	}
	if dir.Symlink || !dir.Dir {
		f := fsops.Finding{Status: "invalid", Rel: fsops.SecretDirName, Detail: "not a directory: agents' secrets are not read from it"}
		fixes[f] = "remove it; ctx secret set makes the directory"
		return []fsops.Finding{f}
	}
	var out []fsops.Finding
	if why := policy.SecretDirProblem(dir.UID, dir.Perm, owner); why != "" {
		f := fsops.Finding{Status: "invalid", Rel: fsops.SecretDirName, Detail: why + "; no agent with secrets starts"}
		fixes[f] = fmt.Sprintf("chown %d %s; chmod 711 %s", owner, q, q)
		out = append(out, f)
	} else {
		out = append(out, fsops.Finding{Status: "ok", Rel: fsops.SecretDirName, Detail: fmt.Sprintf("mode %04o, uid %d", dir.Perm, dir.UID)})
	}
	if err != nil {
		return append(out, fsops.Finding{Status: "ok", Rel: fsops.SecretDirName,
			Detail: fmt.Sprintf("not listed: uid %d may not read it (%s)", os.Geteuid(), cli.Escape(err.Error()))})
	}
	for _, en := range entries {
		out = append(out, checkSecretFile(root, en, owner, fixes))
	}
	return out
}

// checkSecretFile is checkSecrets for one entry of the directory.
func checkSecretFile(root fsops.Root, en fsops.SecretEntry, owner uint32, fixes map[fsops.Finding]string) fsops.Finding {
	rel := fsops.SecretDirName + "/" + en.Name
	q := fsops.ShellQuote(root.SecretFile(en.Name))
	invalid := func(detail, fix string) fsops.Finding {
		f := fsops.Finding{Status: "invalid", Rel: cli.Escape(rel), Detail: detail}
		fixes[f] = fix
		return f
	}
	if policy.ValidName(en.Name) != nil || strings.HasPrefix(en.Name, ".") {
		return invalid("not an agent's name: ctx reads no secrets from it", "rm "+q)
	}
	if _, err := os.Lstat(root.AgentControl(en.Name)); err != nil {
		f := fsops.Finding{Status: "stale", Rel: rel, Detail: "no agent " + en.Name + ": an agent made later with this name would get these secrets"}
		fixes[f] = "rm " + q
		return f
	}
	a, err := authority.LoadAgent(root, en.Name)
	if err != nil {
		return fsops.Finding{Status: "ok", Rel: rel, Detail: "not checked: the agent's controls are invalid"}
	}
	if why := policy.SecretFileProblem(en.UID, en.Perm, en.Regular, owner, a.Owner); why != "" {
		return invalid(why+"; agent "+en.Name+" does not start", fmt.Sprintf("chmod 600 %s; chown %d %s", q, a.Owner, q))
	}
	secrets, err := lifecycle.ReadSecrets(root, a)
	var se *fsops.SecretError
	switch {
	case errors.As(err, &se) && se.Denied:
		return fsops.Finding{Status: "ok", Rel: rel, Detail: fmt.Sprintf("uid %d may not read it: its runs by uid %d are refused", os.Geteuid(), os.Geteuid())}
	case err != nil:
		return invalid(cli.Escape(err.Error()), "edit "+q+" as its owner, keeping its mode (the line is named), or remove it and give the keys again with ctx secret set"+root.Option()+" "+en.Name+" VAR")
	}
	names := make([]string, len(secrets))
	for i, s := range secrets {
		names[i] = s.Key
	}
	return fsops.Finding{Status: "ok", Rel: rel, Detail: fmt.Sprintf("%d secret(s): %s", len(secrets), strings.Join(names, " "))}
}
