// Command sidecar-terminator runs the controller that stops the sidecars of
// Job pods once their main containers are done. See package app.
package main

import (
	"fmt"
	"os"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
)

func main() {
	if err := app.NewCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar-terminator:", err)
		os.Exit(1)
	}
}
