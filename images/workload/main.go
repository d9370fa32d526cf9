// Command workload plays a Job's containers on a real node: a main
// container that runs a while and exits with a chosen code, or a sidecar
// that runs until SIGTERM and then exits 0, exits non-zero, or ignores it.
// The grammar is in package spec, shared with the mock virtual node.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

func main() {
	b, err := spec.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "workload: %v\n", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	logf("start %s %q", b.Mode, os.Args[1:])
	if b.Mode == spec.Main {
		select {
		case <-time.After(b.Duration):
			code := b.ExitCode
			if b.CountFile != "" {
				code = countedExit(b)
			}
			logf("main done after %s, exit %d", b.Duration, code)
			os.Exit(code)
		case s := <-sigs:
			// Killed before finishing: report it like a shell would.
			logf("main got %s before finishing, exit 143", s)
			os.Exit(143)
		}
	}
	if b.ListenPort != 0 {
		if err := acknowledge(b.ListenPort); err != nil {
			logf("listen: %v", err)
			os.Exit(2)
		}
	}
	for s := range sigs {
		switch {
		case b.IgnoreSIGTERM:
			logf("sidecar got %s, ignoring it", s)
			continue
		case b.DeliverPort != 0:
			if err := deliver(b.DeliverPort); err != nil {
				logf("sidecar got %s; last line lost: %v; exit %d", s, err, spec.ExitLost)
				os.Exit(spec.ExitLost)
			}
			logf("sidecar got %s; last line delivered; exit 0", s)
			os.Exit(0)
		}
		logf("sidecar got %s, exit %d", s, b.SIGTERMExitCode)
		os.Exit(b.SIGTERMExitCode)
	}
}

// acknowledge answers "ok" to each line sent to 127.0.0.1:port, until the
// process exits: the proxy a shipper delivers through.
func acknowledge(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				logf("proxy accepted %q", strings.TrimSpace(line))
				_, _ = c.Write([]byte("ok\n"))
			}()
		}
	}()
	return nil
}

// deliver sends the shipper's last line through the proxy and waits for
// its acknowledgement.
func deliver(port int) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("last line\n")); err != nil {
		return err
	}
	ack, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(ack) != "ok" {
		return fmt.Errorf("acknowledgement %q", ack)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "%s workload: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// countedExit returns the exit code of this run: the file counts the runs
// before it (an emptyDir outlives the container's restarts), the last code
// repeats. A file that cannot be written is a failed run (exit 2), never a
// silent success.
func countedExit(b spec.Behaviour) int {
	n := 0
	if data, err := os.ReadFile(b.CountFile); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	if err := os.WriteFile(b.CountFile, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		logf("write run count %s: %v", b.CountFile, err)
		return 2
	}
	if n >= len(b.ExitCodes) {
		n = len(b.ExitCodes) - 1
	}
	return b.ExitCodes[n]
}
