package toolrun

import (
	"io"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/fsops"
)

var FsReplaceTool = &BuiltinTool{
	Name:        "fs.replace",
	Description: "Replace exactly one occurrence of a text span in a file, atomically.",
	Cap:         "fs.replace",
	Grants:      writersGrants,
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"fs.replace input",` +
		`"type":"object","properties":{"path":{"type":"string","minLength":1},"old":{"type":"string","minLength":1},"new":{"type":"string"}},` +
		`"required":["path","old","new"],"additionalProperties":false}`,
	CLI: func(args []string, _ io.Reader) (map[string]any, error) {
		if len(args) != 3 {
			return nil, InputErr("usage: fs.replace PATH OLD NEW (or JSON input)")
		}
		return map[string]any{"path": args[0], "old": args[1], "new": args[2]}, nil
	},
	Run: fsReplace,
}

func fsReplace(c *ToolCall) error {
	path, _ := c.stringField("path")
	old, _ := c.stringField("old")
	repl, ok := c.stringField("new")
	if old == "" || !ok {
		return InputErr("old must be a non-empty string and new a string")
	}
	b, err := fsops.ReadRegular(path, maxReadFile)
	if err != nil {
		return FsErr(err)
	}
	text := string(b)
	switch n := strings.Count(text, old); {
	case n == 0:
		return ToolErr(syscall.ENOENT, cli.Failure, "%s: old text not found", path)
	case n > 1:
		return ToolErr(syscall.EINVAL, cli.Failure, "%s: old text occurs %d times; it must occur exactly once", path, n)
	}
	if err := writeKeepingMode(path, []byte(strings.Replace(text, old, repl, 1))); err != nil {
		return FsErr(err)
	}
	_, err = io.WriteString(c.Out, "replaced\n")
	return err
}
