package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// codex stands in for Codex (0.171.0): `codex [GLOBAL] mcp add|list`,
// `codex [GLOBAL] exec [FLAGS] PROMPT` and a session, `codex [FLAGS]`
// (prompts on stdin). As measured: exec runs only in a git repository
// (or with --skip-git-repo-check), its key is CODEX_API_KEY (it sends no
// OPENAI_API_KEY), its sandbox is read-only unless the flags or
// config.toml's sandbox_mode say otherwise, and every start asks
// api.github.com for a newer release, which may fail.
func codex(args []string) int {
	var overrides []string
	sandbox := ""
	var positional, mcpArgs []string
	skipGitCheck := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "mcp" && len(positional) == 0 {
			mcpArgs, positional = args[i+1:], []string{a}
			break
		}
		switch a {
		case "-c", "--config", "-s", "--sandbox", "-m", "--model", "-C", "--cd":
			if i+1 >= len(args) {
				fmt.Fprintf(os.Stderr, "error: a value is required for '%s'\n", a)
				return 2
			}
			i++
			switch a {
			case "-c", "--config":
				overrides = append(overrides, args[i])
			case "-s", "--sandbox":
				sandbox = args[i]
			case "-C", "--cd":
				if err := os.Chdir(args[i]); err != nil {
					fmt.Fprintf(os.Stderr, "error: %v\n", err)
					return 1
				}
			}
		case "--dangerously-bypass-approvals-and-sandbox":
			sandbox = "danger-full-access"
		case "--skip-git-repo-check":
			skipGitCheck = true
		case "--full-auto", "--json", "--ephemeral":
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(os.Stderr, "error: unexpected argument '%s' found\n", a)
				return 2
			}
			positional = append(positional, a)
		}
	}
	cfg, err := readCodexConfig(overrides)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error loading config.toml: %v\n", err)
		return 1
	}
	if len(positional) > 0 && positional[0] == "mcp" {
		return codexMCP(mcpArgs, cfg)
	}
	exec := len(positional) > 0 && positional[0] == "exec"
	if exec {
		positional = positional[1:]
		if !skipGitCheck && !inGitRepo() {
			fmt.Fprintln(os.Stderr, "Not inside a trusted directory and --skip-git-repo-check was not specified.")
			return 1
		}
	}
	if sandbox == "" {
		sandbox = cfg.top["sandbox_mode"]
	}
	if sandbox == "" {
		sandbox = "read-only"
	}
	switch sandbox {
	case "read-only", "workspace-write", "danger-full-access":
	default:
		fmt.Fprintf(os.Stderr, "error: invalid value '%s' for '--sandbox <SANDBOX_MODE>'\n", sandbox)
		return 2
	}
	return codexSession(cfg, sandbox, strings.Join(positional, " "), len(positional) > 0)
}

func codexSession(cfg codexConfig, sandbox, prompt string, havePrompt bool) int {
	fmt.Printf("sandbox: %s\n", sandbox)
	if _, err := fetch("https://api.github.com/repos/openai/codex/releases/latest"); err != nil {
		fmt.Fprintf(os.Stderr, "update check failed: %v\n", err)
	}
	key := os.Getenv("CODEX_API_KEY")
	servers := connectAll(cfg.servers)
	defer closeAll(servers)
	ok := true
	for _, p := range prompts(prompt, havePrompt) {
		ok = askAPI("api.openai.com", "https://api.openai.com/v1/responses", "Authorization", "Bearer "+key, p) && ok
		ok = act(p, servers, sandbox != "danger-full-access") && ok
	}
	if !ok {
		return 1
	}
	return 0
}

// inGitRepo: the working directory or one above it has .git.
func inGitRepo() bool {
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, ".git")); serr == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
	return false
}

func codexMCP(args []string, cfg codexConfig) int {
	if len(args) == 1 && args[0] == "list" {
		var names []string
		for n := range cfg.servers {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Println("Name  Command  Args  Status")
		for _, n := range names {
			e := cfg.servers[n]
			fmt.Printf("%s  %s  %s  enabled\n", n, e.Command, strings.Join(e.Args, " "))
		}
		return 0
	}
	if len(args) < 4 || args[0] != "add" || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "Usage: codex mcp add [OPTIONS] <NAME> (--url <URL> | -- <COMMAND>...)")
		return 2
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\ncommand = %s\nargs = [", args[1], strconv.Quote(args[3]))
	for i, a := range args[4:] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(a))
	}
	b.WriteString("]\n")
	path := codexConfigPath()
	os.MkdirAll(filepath.Dir(path), 0o700)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.WriteString(b.String())
		f.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	fmt.Printf("Added global MCP server '%s'.\n", args[1])
	return 0
}

func codexConfigPath() string {
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return filepath.Join(h, "config.toml")
	}
	return filepath.Join(homeDir(), ".codex/config.toml")
}

// codexConfig is the part of config.toml the stand-in reads: top-level
// string keys and the [mcp_servers.NAME] tables.
type codexConfig struct {
	top     map[string]string
	servers map[string]serverEntry
}

// readCodexConfig parses config.toml's subset (KEY = "string", KEY =
// ["string", ...], [table] headers) strictly, then applies the -c
// overrides (KEY=VALUE, VALUE TOML or else a literal).
func readCodexConfig(overrides []string) (codexConfig, error) {
	cfg := codexConfig{top: map[string]string{}, servers: map[string]serverEntry{}}
	text, err := os.ReadFile(codexConfigPath())
	if err != nil && !os.IsNotExist(err) {
		return cfg, err
	}
	table := ""
	for n, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			table = strings.TrimSuffix(strings.TrimPrefix(line, "["), "]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return cfg, fmt.Errorf("line %d: expected KEY = VALUE", n+1)
		}
		if err := cfg.set(table, strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return cfg, fmt.Errorf("line %d: %v", n+1, err)
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			return cfg, fmt.Errorf("-c %s: expected key=value", o)
		}
		if _, err := tomlStrings(v); err != nil {
			v = strconv.Quote(v)
		}
		if err := cfg.set("", k, v); err != nil {
			return cfg, fmt.Errorf("-c %s: %v", o, err)
		}
	}
	return cfg, nil
}

func (cfg *codexConfig) set(table, key, value string) error {
	if rest, ok := strings.CutPrefix(key, "mcp_servers."); ok && table == "" {
		name, k, _ := strings.Cut(rest, ".")
		table, key = "mcp_servers."+name, k
	}
	vals, err := tomlStrings(value)
	if err != nil {
		return err
	}
	name, isServer := strings.CutPrefix(table, "mcp_servers.")
	switch {
	case table == "":
		cfg.top[key] = strings.Join(vals, " ")
	case isServer && key == "command":
		e := cfg.servers[name]
		e.Command = strings.Join(vals, " ")
		cfg.servers[name] = e
	case isServer && key == "args":
		e := cfg.servers[name]
		e.Args = vals
		cfg.servers[name] = e
	}
	return nil
}

// tomlStrings parses a TOML basic string or an array of them.
func tomlStrings(v string) ([]string, error) {
	if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		var out []string
		rest := strings.TrimSpace(v[1 : len(v)-1])
		for rest != "" {
			s, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("bad array %s", v)
			}
			u, _ := strconv.Unquote(s)
			out = append(out, u)
			rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest[len(s):]), ","))
		}
		return out, nil
	}
	u, err := strconv.Unquote(v)
	if err != nil || !strings.HasPrefix(v, `"`) {
		return nil, fmt.Errorf("not a string: %s", v)
	}
	return []string{u}, nil
}
