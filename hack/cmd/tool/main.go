// Command tool runs a tool pinned in hack/tools, building it into the cache
// first when needed: `go run ./hack/cmd/tool actionlint`, `go run
// ./hack/cmd/tool helm lint ...`, or `go run ./hack/cmd/tool -path helm` to
// print the binary's path.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

func main() {
	args := os.Args[1:]
	printPath := len(args) > 0 && args[0] == "-path"
	if printPath {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: tool [-path] NAME [ARGS...]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	bin, err := toolbin.Path(ctx, args[0])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tool:", err)
		os.Exit(1)
	}
	if printPath {
		fmt.Println(bin)
		return
	}
	// Exec, so the tool's exit code and signals are the command's own.
	if err := syscall.Exec(bin, append([]string{args[0]}, args[1:]...), os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "tool:", err)
		os.Exit(1)
	}
}
