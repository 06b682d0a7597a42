package toolrun

// BuiltinPrograms are the program controls bootstrap writes for the
// builtin tools (tool/NAME.d/program): a JSON Schema of what a successful
// call prints on standard output in terminal mode, the agentrc profile's
// "output" of a self-describing tool. They describe, never constrain: the
// program control is shown in the toolspec (outputSchema) and printed by
// --agentrc-schema, and nothing checks a result against it. ctxmcp serve
// does not offer it as MCP's outputSchema (that is output.schema, a
// structuredContent promise the builtins do not make). The terminal tools
// (bash, tmux, zellij) hand over a terminal and have none.
var BuiltinPrograms = map[string]string{
	"fs.read": program("fs.read", `"type":"string","contentMediaType":"text/plain",`+
		`"description":"the file's text, exactly as stored"`),
	"fs.list": program("fs.list", `"type":"array","description":"the directory's entries in name order, at most max_entries",`+
		`"items":`+fileEntrySchema),
	"fs.stat":      program("fs.stat", fileEntrySchema[1:len(fileEntrySchema)-1]),
	"fs.write":     program("fs.write", `"const":"written\n","description":"the file was replaced whole"`),
	"fs.replace":   program("fs.replace", `"const":"replaced\n","description":"the one occurrence was replaced"`),
	"shell.exec":   program("shell.exec", `"type":"string","description":"the command's standard output, then its standard error, each capped; the exit status is the command's"`),
	"tsh":          program("tsh", `"type":"string","description":"what the command line's builtin or tool printed; the exit status is its"`),
	"tsh.config":   program("tsh.config", `"type":"string","description":"the config file's path, then its settings, one KEY=VALUE a line"`),
	"agent.create": program("agent.create", `"type":"string","pattern":"^created agent/","description":"one line: created agent/NAME (subject S, perm P, parent A)"`),
	"agent.start":  program("agent.start", `"type":"string","description":"one line: started agent/NAME (run host pid P), or starting ... when not ready in time"`),
	"agent.stop":   program("agent.stop", `"type":"string","description":"one line: the child that was stopped"`),
	"agent.update": program("agent.update", `"type":"string","pattern":"^updated agent/","description":"one line: the control replaced and its size"`),
}

// fileEntrySchema is one entry of fs.list and the result of fs.stat.
const fileEntrySchema = `{"type":"object","properties":{"name":{"type":"string"},` +
	`"type":{"enum":["file","directory","symlink","other"]},"size":{"type":"integer"},` +
	`"mode":{"type":"integer","description":"the permission bits, set-id and sticky bits"}},` +
	`"required":["name","type","size","mode"],"additionalProperties":false}`

func program(name, body string) string {
	return `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"` + name + ` output",` + body + `}`
}
