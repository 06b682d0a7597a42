package toolrun

// BuiltinAnnotations are the annotations controls bootstrap writes for the
// builtin tools (tool/NAME.d/annotations): the MCP hints ctxmcp serve
// hands to clients, which may use them to decide what needs a person's
// confirmation. They are honest about effects, never a grant: fs.read,
// fs.list and fs.stat only read the agent's view (read-only, closed
// world); fs.write and fs.replace change files (destructive; writing the
// same content twice changes nothing more, replacing does); shell.exec runs
// any command (destructive, open world: it may reach beyond the files).
// Tools without an entry (tsh, bash, agent.*) carry no control, which MCP
// reads as the cautious defaults.
var BuiltinAnnotations = map[string]string{
	"fs.read":    `{"title":"Read file","readOnlyHint":true,"openWorldHint":false}`,
	"fs.list":    `{"title":"List directory","readOnlyHint":true,"openWorldHint":false}`,
	"fs.stat":    `{"title":"Stat path","readOnlyHint":true,"openWorldHint":false}`,
	"fs.write":   `{"title":"Write file","readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}`,
	"fs.replace": `{"title":"Replace text in file","readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":false}`,
	"shell.exec": `{"title":"Run shell command","readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}`,
}
