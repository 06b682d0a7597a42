package toolrun

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"ctx/applets/cli"
)

// Interactive tools run a host program of their own name (bash, tmux,
// zellij) with inherited stdio: the way an agent enters an interactive shell
// or multiplexer from tsh. Inside, `exit` returns to tsh. They are governed
// by perm x and policy like any tool.
func interactiveTool(name, description string) *BuiltinTool {
	return &BuiltinTool{
		Name:        name,
		Description: description,
		Cap:         "terminal",
		Grants:      writersGrants,
		Passthrough: true,
		Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"` + name + ` input",` +
			`"type":"object","properties":{"args":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
		Run: runInteractive,
	}
}

var (
	BashTool   = interactiveTool("bash", "Interactive bash shell (the host's /usr/bin/bash or /bin/bash) with a cleared environment.")
	TmuxTool   = interactiveTool("tmux", "Terminal multiplexer (the host's tmux) for background terminal work, with a cleared environment.")
	ZellijTool = interactiveTool("zellij", "Terminal multiplexer (the host's zellij) for background terminal work, with a cleared environment.")
)

func runInteractive(c *ToolCall) error {
	name := c.tool.Name
	var prog string
	for _, dir := range []string{"/usr/bin/", "/bin/"} {
		if st, err := os.Stat(dir + name); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			prog = dir + name
			break
		}
	}
	if prog == "" {
		return ToolErr(syscall.ENOENT, cli.Unavailable, "%s is not installed on this host", name)
	}
	cmd := exec.Command(prog, c.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Env.Stdin, c.Env.Stdout, c.Env.Stderr
	cmd.Env = interactiveEnv(c.Env)
	// The terminal's ^C and ^\ belong to the program in the foreground; we
	// only wait for it.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		return ToolErr(syscall.EIO, cli.Unavailable, "cannot start %s: %v", prog, err)
	}
	state, _ := cmd.Process.Wait()
	c.exit = ExitStatus(state)
	return nil
}

// interactiveEnv is the cleared environment of an interactive tool: a fixed
// PATH, the terminal and identity variables, and the run's CTX_ keys so the
// program can call tsh again.
func interactiveEnv(e *cli.Env) []string {
	env := []string{"PATH=/usr/bin:/bin"}
	for _, k := range []string{"HOME", "TERM", "LANG", "USER", "LOGNAME", "SHELL",
		"CTX_ROOT", "CTX_HOME", "CTX_PATH", "CTX_AGENT", "CTX_AGENT_SUBJECT", "CTX_SESSION",
		"CTX_RUN_ID", "CTX_RUN_FD", "CTX_TOOL_MODE", "CTX_AUTHORIZED_OBJECT"} {
		if v := e.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
