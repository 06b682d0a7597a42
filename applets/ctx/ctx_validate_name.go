package ctx

import (
	"fmt"

	"ctx/applets/cli"
	"ctx/policy"
)

// RunValidateName is `ctx validate-name [--model] NAME...`: exit 0 when every
// NAME is a valid object name (or model reference with --model), else 2 with
// one line per invalid name.
func RunValidateName(e *cli.Env, args []string) int {
	var model bool
	f := cli.NewFlags()
	f.Bool("model", &model)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, -1)
	if !ok {
		return code
	}
	code = cli.OK
	for _, name := range pos {
		check := policy.ValidName
		if model {
			check = policy.ValidModelRef
		}
		if err := check(name); err != nil {
			code = cli.Fail(e, cli.Usage, "%v", err)
			continue
		}
		fmt.Fprintf(e.Stdout, "valid %s\n", name)
	}
	return code
}
