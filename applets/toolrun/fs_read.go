package toolrun

import (
	"syscall"
	"unicode/utf8"

	"ctx/applets/cli"
	"ctx/fsops"
)

// maxReadFile bounds fs.read and fs.replace: 1 MiB.
const maxReadFile = 1 << 20

var FsReadTool = &BuiltinTool{
	Name:        "fs.read",
	Description: "Read one UTF-8 text file (regular files only, at most 1 MiB; a symlink is not followed).",
	Cap:         "fs.read",
	Grants:      readersGrants,
	Bare:        "path",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"fs.read input",` +
		`"type":"object","properties":{"path":{"type":"string","minLength":1,"description":"file to read, relative to the working directory"}},` +
		`"required":["path"],"additionalProperties":false}`,
	Run: fsRead,
}

func fsRead(c *ToolCall) error {
	path, _ := c.stringField("path")
	b, err := fsops.ReadRegular(path, maxReadFile)
	if err != nil {
		return FsErr(err)
	}
	if !utf8.Valid(b) {
		return ToolErr(syscall.EILSEQ, cli.Failure, "%s: not UTF-8 text", path)
	}
	_, err = c.Out.Write(b)
	return err
}
