// Command ctx-standin stands in, in the recipe tests (testdata/script/
// recipe_*.txtar, manual/ctx.recipes.md), for the programs and servers a
// person runs inside ctx and that the tests may not reach: the agent CLIs
// Claude Code and Codex, npm and pip, and the hosts they talk to (the
// model APIs, the package registries, the Go module proxy). It is one
// static binary, chosen by the name it is run as:
//
//	claude ...            Claude Code: mcp add|list, or a session (-p PROMPT, or prompts on stdin)
//	codex ...             Codex: mcp add|list, exec PROMPT, or a session
//	npm install|i ...     npm: packages from the registry into node_modules
//	pip|pip3 install ...  pip: wheels from the index into site-packages
//	ctx-standin serve ADDR CAFILE LOG READY   the stand-in hosts, HTTPS on ADDR
//	ctx-standin recipe TITLE [N]              the Nth shell block of a recipe of the page on stdin
//	ctx-standin gosum                         go.sum lines of the stand-in Go module
//	NAME ... in volta's or rustup's bin       volta-shim, a rustup proxy (managers.go)
//
// The stand-ins do what the real programs do at the places ctx touches,
// measured with Claude Code 2.1.332 and Codex 0.171.0: the same command
// lines and configuration files (an invented flag is refused, as the real
// parsers refuse it), an MCP client that starts its configured servers,
// the API key read from the environment, HTTPS through HTTPS_PROXY with
// the system's trust (SSL_CERT_FILE), and an own sandbox that needs a
// user namespace, which ctx's sandbox refuses.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "ctx-standin" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch name {
	case "claude":
		os.Exit(claude(args))
	case "codex":
		os.Exit(codex(args))
	case "npm", "npm-cli":
		os.Exit(npm(args))
	case "pip", "pip3":
		os.Exit(pip(args))
	case "serve":
		os.Exit(serve(args))
	case "recipe":
		os.Exit(recipe(args))
	case "gosum":
		os.Exit(gosum())
	case "nest":
		// the child of the own-sandbox probe: it got its user namespace
		os.Exit(0)
	}
	if code, ok := managerShim(name, args); ok {
		os.Exit(code)
	}
	fmt.Fprintf(os.Stderr, "ctx-standin: unknown personality %q\n", name)
	os.Exit(2)
}

// client is the HTTP client every stand-in CLI uses, as the real ones do:
// the proxy from HTTP_PROXY, HTTPS_PROXY and NO_PROXY, the system's roots
// (SSL_CERT_FILE), TLS end to end through CONNECT.
var client = &http.Client{
	Timeout:   20 * time.Second,
	Transport: &http.Transport{Proxy: http.ProxyFromEnvironment},
}

// fetch GETs url and returns its body, or an error naming the status.
func fetch(url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// askAPI posts a prompt to a model API with the key in header and prints
// one line: the answer, or why there is none.
func askAPI(label, url, header, value, prompt string) bool {
	req, err := http.NewRequest("POST", url, strings.NewReader(fmt.Sprintf("{\"prompt\":%q}", prompt)))
	if err != nil {
		fmt.Printf("api: error: %v\n", err)
		return false
	}
	req.Header.Set(header, value)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Printf("api: error: %v\n", err)
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Printf("api: %s %s: %s\n", label, resp.Status, strings.TrimSpace(string(body)))
	return resp.StatusCode == http.StatusOK
}

// ownSandboxProbe tries what a CLI's own sandbox needs first, a new user
// namespace (bubblewrap's, as Claude Code's and Codex's sandboxes use on
// Linux): it starts this binary in one. Inside ctx's sandbox the kernel
// call is refused; the error says what the real CLIs say.
func ownSandboxProbe() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "nest")
	cmd.Args[0] = "ctx-standin"
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bwrap: No permissions to create new namespace (%v)", err)
	}
	return nil
}

// runShell runs a model's shell command, in the CLI's own sandbox when
// that is on (the probe first: no namespace, no command), and prints its
// output as "sh: ...".
func runShell(command string, ownSandbox bool) bool {
	if ownSandbox {
		if err := ownSandboxProbe(); err != nil {
			fmt.Printf("sh: sandbox error: %v\n", err)
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", command).CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Printf("sh: %s\n", l)
	}
	if err != nil {
		fmt.Printf("sh: %v\n", err)
		return false
	}
	return true
}

// prompts returns the session's prompts: the one given, else each line
// of standard input (an interactive session, typed).
func prompts(given string, haveGiven bool) []string {
	if haveGiven {
		return []string{given}
	}
	var out []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// act does what a prompt asks, the stand-in model's two moves: "tool NAME
// JSON" calls an MCP tool, "sh COMMAND" runs a shell command; anything
// else is only talk.
func act(prompt string, servers []*mcpSession, ownSandbox bool) bool {
	verb, rest, _ := strings.Cut(prompt, " ")
	switch verb {
	case "tool":
		name, input, _ := strings.Cut(rest, " ")
		return callTool(servers, name, input)
	case "sh":
		return runShell(rest, ownSandbox)
	}
	return true
}

func homeDir() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	return "/"
}
