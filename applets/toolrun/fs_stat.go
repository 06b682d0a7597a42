package toolrun

import (
	"encoding/json"
	"os"

	"ctx/fsops"
)

var FsStatTool = &BuiltinTool{
	Name:        "fs.stat",
	Description: "Report name, type, size and mode of one path without following a symlink.",
	Cap:         "fs.stat",
	Grants:      readersGrants,
	Bare:        "path",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"fs.stat input",` +
		`"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"],"additionalProperties":false}`,
	Run: fsStat,
}

func fsStat(c *ToolCall) error {
	path, _ := c.stringField("path")
	st, err := fsops.Lstat(path)
	if err != nil {
		return FsErr(&os.PathError{Op: "stat", Path: path, Err: err})
	}
	b, _ := json.Marshal(entryOf(path, &st))
	_, err = c.Out.Write(append(b, '\n'))
	return err
}
