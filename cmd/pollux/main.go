// Command pollux is Pollux's tool: `pollux dev` runs everything in one
// process on an embedded NATS server with a simulated provider; `submit` and
// `get` talk to a running deployment; `sim-provider` runs the simulator.
package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kong"

	"github.com/pollux-dev/pollux/internal/platform/version"
	"github.com/pollux-dev/pollux/internal/tools/cli"
	"github.com/pollux-dev/pollux/internal/wiring/app"
)

func main() {
	var c cli.CLI
	k := kong.Parse(&c, kong.Name("pollux"),
		kong.Description("Pollux tracks jobs at asynchronous generation APIs on NATS JetStream."),
		kong.Vars{"version": version.String("pollux")}, kong.UsageOnError())
	log, err := app.NewLogger(c.LogLevel, c.LogFormat, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := k.Run(&cli.Globals{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, Log: log}); err != nil {
		fmt.Fprintln(os.Stderr, "pollux:", err)
		os.Exit(1)
	}
}
