// Command agent is the headless agent that runs inside every sandbox.
//
//	agent version    print the build version
//	agent help       list the commands
//
// The workflow commands (run, validate, inspect) and the sandbox mode arrive with
// the agent runtime; until then the binary answers for what it has and refuses the
// rest with exit status 2.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: agent <command>

commands:
  version   print the build version
  help      show this help
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(stdout, "agent", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "agent: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
