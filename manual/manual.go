// Package manual embeds the Markdown pages that are the one source for
// `ctx man`, every `APPLET --help`, and the docs bundle bootstrap writes to
// shared/cortexfs-docs/.
//
// Page files are named after what they document:
//
//	NAME.md          an applet (fs.read.md, tsh.md, ctx.md)
//	ctx-CMD.md       a ctx subcommand (ctx-bootstrap.md)
//	ctx.TOPIC.md     a topic of the CortexFS manual bundle (ctx.tool.md)
//
// Every page starts with "# NAME - summary" and has a "## SYNOPSIS" section
// holding one fenced code block.
package manual

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.md
var pages embed.FS

// topicAliases maps the short names accepted by `ctx man` to bundle
// topics: pairs in an array, static data, where a map would be built at
// every start of every applet.
var topicAliases = [...][2]string{
	{"agent", "ctx.agent"}, {"agents", "ctx.agent"},
	{"tool", "ctx.tool"}, {"tools", "ctx.tool"},
	{"policy", "ctx.policy"},
	{"session", "ctx.session"}, {"sessions", "ctx.session"},
	{"ctx", "ctx.coreutils"}, {"coreutils", "ctx.coreutils"},
	{"root", "ctx.root-abi"}, {"abi", "ctx.root-abi"}, {"root-abi", "ctx.root-abi"},
	{"model", "ctx.model"}, {"models", "ctx.model"},
	{"provider", "ctx.provider"}, {"providers", "ctx.provider"},
	{"shared", "ctx.shared"}, {"queue", "ctx.shared"},
	{"sandbox", "ctx.sandbox"}, {"mnt", "ctx.sandbox"},
	{"mcp", "ctx.mcp"},
	{"agentrc", "ctx.agentrc"},
	{"tutorial", "ctx.tutorial"},
	{"recipes", "ctx.recipes"}, {"recipe", "ctx.recipes"},
}

// Files returns the names of all embedded page files, sorted.
func Files() []string {
	entries, _ := fs.ReadDir(pages, ".")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Read returns the embedded bytes of a page file ("fs.read.md").
func Read(file string) ([]byte, bool) {
	b, err := pages.ReadFile(file)
	return b, err == nil
}

// Resolve maps what a user typed after `ctx man` to a page file. It accepts a
// file name, a page name, a topic alias, an applet name and a ctx
// subcommand name, in that order of preference.
func Resolve(topic string) (string, bool) {
	topic = strings.TrimSuffix(topic, ".md")
	for _, a := range topicAliases {
		if a[0] == topic {
			topic = a[1]
			break
		}
	}
	for _, candidate := range []string{topic, "ctx-" + topic} {
		if _, ok := Read(candidate + ".md"); ok {
			return candidate + ".md", true
		}
	}
	return "", false
}

// Summary returns the one-line summary from a page's title line.
func Summary(page string) string {
	b, ok := Read(page + ".md")
	if !ok {
		return ""
	}
	title, _, _ := strings.Cut(string(b), "\n")
	title = strings.TrimPrefix(title, "# ")
	if _, s, ok := strings.Cut(title, " - "); ok {
		return s
	}
	return ""
}

// Synopsis returns what `NAME --help` prints: the title line and the body of
// the SYNOPSIS code block.
func Synopsis(page string) (string, bool) {
	text, body, ok := synopsis(page)
	if !ok {
		return "", false
	}
	title, _, _ := strings.Cut(text, "\n")
	return strings.TrimPrefix(title, "# ") + "\n\n" + body + "\nSee `ctx man " + page + "` for the whole page.\n", true
}

// synopsis returns page's text and the body of its SYNOPSIS code block.
func synopsis(page string) (text, body string, ok bool) {
	b, ok := Read(page + ".md")
	if !ok {
		return "", "", false
	}
	text = string(b)
	block, ok := section(text, "SYNOPSIS")
	if !ok {
		return "", "", false
	}
	body, ok = fenced(block)
	return text, body, ok
}

// section returns the text of "## NAME" up to the next "## " heading.
func section(text, name string) (string, bool) {
	start := strings.Index(text, "\n## "+name+"\n")
	if start < 0 {
		return "", false
	}
	rest := text[start+len(name)+5:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end+1]
	}
	return rest, true
}

// fenced returns the body of the first ``` block in text.
func fenced(text string) (string, bool) {
	open := strings.Index(text, "```")
	if open < 0 {
		return "", false
	}
	rest := text[open+3:]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 {
		return "", false
	}
	rest = rest[nl+1:]
	close := strings.Index(rest, "```")
	if close < 0 {
		return "", false
	}
	return rest[:close], true
}

// Bundle returns the docs bundle bootstrap writes under
// shared/cortexfs-docs/: README.md and man/<file> for every page.
func Bundle() map[string][]byte {
	out := map[string][]byte{"README.md": bundleIndex()}
	for _, f := range Files() {
		b, _ := Read(f)
		out["man/"+f] = b
	}
	return out
}

func bundleIndex() []byte {
	var b strings.Builder
	b.WriteString("# CortexFS manual (ctx)\n\n")
	b.WriteString("Read-only documentation written by `ctx bootstrap` from the manual compiled into\n")
	b.WriteString("the ctx binary. It grants no authority. `ctx man TOPIC` prints these pages.\n\n")
	b.WriteString("| page | what it covers |\n|---|---|\n")
	for _, f := range Files() {
		name := strings.TrimSuffix(f, ".md")
		b.WriteString("| [" + name + "](man/" + f + ") | " + Summary(name) + " |\n")
	}
	return []byte(b.String())
}

// VerbHelp returns what `CMD VERB --help` prints for one verb of a page
// whose synopsis lines start with cmd ("ctx agent", "ctxmcp", "ctx"): a
// title line with the first sentence the DESCRIPTION says about the verb,
// then the verb's synopsis lines (with their indented continuations). A
// verb is the first word after cmd that is not a bracketed option, so
// "ctx which [--root DIR] tool NAME" is verb "tool". It reports false when
// the synopsis has no line for verb or the description says nothing of it.
func VerbHelp(page, cmd, verb string) (string, bool) {
	text, body, ok := synopsis(page)
	if !ok {
		return "", false
	}
	var lines []string
	taking := false
	for _, l := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(l, cmd+" "):
			taking = synopsisVerb(strings.TrimPrefix(l, cmd+" ")) == verb
		case l == "" || (l[0] != ' ' && l[0] != '\t'):
			taking = false
		}
		if taking {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", false
	}
	desc, _ := section(text, "DESCRIPTION")
	what := verbSentence(desc, cmd, verb)
	if what == "" {
		return "", false
	}
	return cmd + " " + verb + " - " + what + "\n\n" + strings.Join(lines, "\n") + "\n\nSee `ctx man " + page + "` for the whole page.\n", true
}

// synopsisVerb returns the first word of rest that is not inside [...].
func synopsisVerb(rest string) string {
	depth := 0
	for _, w := range strings.Fields(rest) {
		if depth == 0 && !strings.HasPrefix(w, "[") {
			return w
		}
		depth += strings.Count(w, "[") - strings.Count(w, "]")
	}
	return ""
}

// verbSentence finds the paragraph of desc that introduces verb: under a
// "### verb" (or "### verb, other") heading, or one that opens with
// **verb**, `verb` or `cmd verb`; and returns its first sentence.
func verbSentence(desc, cmd, verb string) string {
	paras := strings.Split(desc, "\n\n")
	for i, p := range paras {
		p = strings.TrimSpace(p)
		if h, ok := strings.CutPrefix(p, "### "); ok {
			for _, name := range strings.Split(h, ",") {
				if strings.TrimSpace(name) == verb && i+1 < len(paras) {
					next := strings.TrimSpace(paras[i+1])
					if strings.HasPrefix(next, "`"+cmd+" "+verb) {
						next = dropOpener(next)
					}
					return firstSentence(next)
				}
			}
			continue
		}
		for _, opener := range []string{"**" + verb + "**", "`" + verb + "`", "`" + verb + " ", "`" + cmd + " " + verb + "`", "`" + cmd + " " + verb + " "} {
			if strings.HasPrefix(p, opener) {
				return firstSentence(dropOpener(p))
			}
		}
	}
	return ""
}

// dropOpener removes the marked-up name a paragraph opens with ("**install**
// installs ..." → "installs ..."), and a parenthesis right after it.
func dropOpener(p string) string {
	mark := "`"
	if strings.HasPrefix(p, "**") {
		mark = "**"
	}
	end := strings.Index(p[len(mark):], mark)
	if end < 0 {
		return p
	}
	rest := strings.TrimSpace(p[len(mark)+end+len(mark):])
	if strings.HasPrefix(rest, "(") {
		if close := strings.IndexByte(rest, ')'); close >= 0 {
			rest = strings.TrimSpace(rest[close+1:])
		}
	}
	return rest
}

// firstSentence returns p up to its first full stop (or a colon that opens
// a list), on one line.
func firstSentence(p string) string {
	p = strings.Join(strings.Fields(p), " ")
	depth := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '(':
			depth++
		case ')':
			depth--
		case '.', ':':
			if depth <= 0 && (i+1 == len(p) || p[i+1] == ' ') {
				return p[:i] + "."
			}
		}
	}
	return p
}
