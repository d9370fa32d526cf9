// Command pause is the pod sandbox's process: it does nothing until SIGTERM
// or SIGINT, and reaps orphaned children, which is its job when the pod
// shares one process namespace. A few lines of Go instead of the upstream C
// pause, so the image builds with no Docker engine and no C toolchain.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
