package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// claude stands in for Claude Code (2.1.332): `claude mcp add|list`, and a
// session: `claude [-p] [--settings S] [--mcp-config C]... [PROMPT]`.
func claude(args []string) int {
	if len(args) > 0 && args[0] == "mcp" {
		return claudeMCP(args[1:])
	}
	var (
		strict     bool
		settings   []string
		configs    []string
		positional []string
	)
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, value, hasValue := strings.Cut(a, "=")
		switch flag {
		case "-p", "--print", "--dangerously-skip-permissions", "--verbose":
			// a session without a terminal: prompts from the command line or stdin
		case "--strict-mcp-config":
			strict = true
		case "--settings", "--mcp-config", "--model", "--permission-mode", "--append-system-prompt", "--add-dir":
			if !hasValue {
				if i+1 >= len(args) {
					fmt.Fprintf(os.Stderr, "error: option '%s' argument missing\n", flag)
					return 1
				}
				i++
				value = args[i]
			}
			switch flag {
			case "--settings":
				settings = append(settings, value)
			case "--mcp-config":
				configs = append(configs, value)
			}
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(os.Stderr, "error: unknown option '%s'\n", a)
				return 1
			}
			positional = append(positional, a)
		}
	}
	return claudeSession(settings, configs, strict, strings.Join(positional, " "), len(positional) > 0)
}

// claudeSession: the settings' sandbox first (it can refuse the start),
// the key, the MCP servers, then each prompt: the API asked, the move made.
func claudeSession(settings, configs []string, strict bool, prompt string, havePrompt bool) int {
	sandbox, err := claudeSandbox(settings)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		fmt.Fprintln(os.Stderr, "Error: no API key: ANTHROPIC_API_KEY is not set (run /login)")
		return 1
	}
	entries := map[string]serverEntry{}
	if !strict {
		for n, e := range claudeUserServers() {
			entries[n] = e
		}
	}
	for _, c := range configs {
		if err := loadClaudeConfig(c, entries); err != nil {
			fmt.Fprintf(os.Stderr, "Error: --mcp-config: %v\n", err)
			return 1
		}
	}
	servers := connectAll(entries)
	defer closeAll(servers)
	ok := true
	for _, p := range prompts(prompt, havePrompt) {
		ok = askAPI("api.anthropic.com", "https://api.anthropic.com/v1/messages", "x-api-key", key, p) && ok
		ok = act(p, servers, sandbox) && ok
	}
	if !ok {
		return 1
	}
	return 0
}

// claudeSandbox reads sandbox.enabled and sandbox.failIfUnavailable from
// the settings files and --settings (each later source wins) and, when
// the sandbox is on, tries it: unavailable with failIfUnavailable refuses
// the start; without it, a warning and commands run without it.
func claudeSandbox(flags []string) (bool, error) {
	type sandbox struct {
		Enabled           *bool `json:"enabled"`
		FailIfUnavailable *bool `json:"failIfUnavailable"`
	}
	var enabled, failIfUnavailable bool
	sources := []string{filepath.Join(homeDir(), ".claude/settings.json"), ".claude/settings.json", ".claude/settings.local.json"}
	for i, src := range append(sources, flags...) {
		text, err := os.ReadFile(src)
		if err != nil && i >= len(sources) {
			text, err = []byte(src), nil // --settings takes a file or JSON
		}
		if err != nil {
			continue
		}
		var s struct{ Sandbox sandbox }
		if err := json.Unmarshal(text, &s); err != nil {
			return false, fmt.Errorf("settings %s: %v", src, err)
		}
		if s.Sandbox.Enabled != nil {
			enabled = *s.Sandbox.Enabled
		}
		if s.Sandbox.FailIfUnavailable != nil {
			failIfUnavailable = *s.Sandbox.FailIfUnavailable
		}
	}
	if !enabled {
		return false, nil
	}
	if err := ownSandboxProbe(); err != nil {
		if failIfUnavailable {
			return false, fmt.Errorf("sandbox required but unavailable: %v; Refusing to start without a working sandbox (see sandbox.failIfUnavailable)", err)
		}
		fmt.Fprintf(os.Stderr, "Warning: sandbox unavailable (%v): commands run without it\n", err)
		return false, nil
	}
	return true, nil
}

// claudeState is ~/.claude.json: user-scope servers at the top, local
// scope under the project's directory.
type claudeState map[string]json.RawMessage

func claudeStatePath() string { return filepath.Join(homeDir(), ".claude.json") }

func readClaudeState() claudeState {
	st := claudeState{}
	if b, err := os.ReadFile(claudeStatePath()); err == nil {
		json.Unmarshal(b, &st)
	}
	return st
}

// claudeUserServers returns the user scope's servers and the local scope's
// for the current directory.
func claudeUserServers() map[string]serverEntry {
	st := readClaudeState()
	out := map[string]serverEntry{}
	json.Unmarshal(st["mcpServers"], &out)
	var projects map[string]struct {
		MCPServers map[string]serverEntry `json:"mcpServers"`
	}
	json.Unmarshal(st["projects"], &projects)
	if wd, err := os.Getwd(); err == nil {
		for n, e := range projects[wd].MCPServers {
			out[n] = e
		}
	}
	return out
}

// loadClaudeConfig reads an --mcp-config value, a file or a JSON string,
// {"mcpServers": {...}}, into entries.
func loadClaudeConfig(c string, entries map[string]serverEntry) error {
	text, err := os.ReadFile(c)
	if err != nil {
		text = []byte(c)
	}
	var cfg struct {
		MCPServers map[string]serverEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(text, &cfg); err != nil {
		return err
	}
	for n, e := range cfg.MCPServers {
		entries[n] = e
	}
	return nil
}

// claudeMCP: `mcp add [-s|--scope local|user] NAME [--] CMD ARGS...` and
// `mcp list`, which starts each server to say it connects.
func claudeMCP(args []string) int {
	if len(args) == 1 && args[0] == "list" {
		entries := claudeUserServers()
		if len(entries) == 0 {
			fmt.Println("No MCP servers configured. Use `claude mcp add` to add a server.")
			return 0
		}
		fmt.Println("Checking MCP server health...")
		for n, e := range entries {
			s, err := connect(n, e)
			status := "Connected"
			if err != nil {
				status = "Failed to connect: " + err.Error()
			} else {
				s.close()
			}
			fmt.Printf("%s: %s - %s\n", n, strings.Join(append([]string{e.Command}, e.Args...), " "), status)
		}
		return 0
	}
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprintln(os.Stderr, "usage: claude mcp add|list")
		return 1
	}
	scope := "local"
	rest := args[1:]
	for len(rest) > 1 && (rest[0] == "-s" || rest[0] == "--scope") {
		scope, rest = rest[1], rest[2:]
	}
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	if len(rest) < 2 || (scope != "local" && scope != "user") {
		fmt.Fprintln(os.Stderr, "error: usage: claude mcp add [--scope local|user] <name> <command> [args...]")
		return 1
	}
	return claudeAdd(scope, rest[0], serverEntry{Type: "stdio", Command: rest[1], Args: append([]string{}, rest[2:]...), Env: map[string]string{}})
}

func claudeAdd(scope, name string, e serverEntry) int {
	st := readClaudeState()
	if scope == "user" {
		servers := map[string]serverEntry{}
		json.Unmarshal(st["mcpServers"], &servers)
		servers[name] = e
		st["mcpServers"], _ = json.Marshal(servers)
	} else {
		wd, _ := os.Getwd()
		projects := map[string]map[string]map[string]serverEntry{}
		json.Unmarshal(st["projects"], &projects)
		if projects[wd] == nil {
			projects[wd] = map[string]map[string]serverEntry{}
		}
		if projects[wd]["mcpServers"] == nil {
			projects[wd]["mcpServers"] = map[string]serverEntry{}
		}
		projects[wd]["mcpServers"][name] = e
		st["projects"], _ = json.Marshal(projects)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(claudeStatePath(), b, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return 1
	}
	fmt.Printf("Added stdio MCP server %s with command: %s to %s config\n", name, strings.Join(append([]string{e.Command}, e.Args...), " "), scope)
	fmt.Printf("File modified: %s\n", claudeStatePath())
	return 0
}
