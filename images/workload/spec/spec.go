// Package spec parses the workload image's argv. It is a separate package
// so that anything playing the container without running it (the
// virtual-kubelet mock node, the simulator) reads the same grammar:
//
//	workload main    [--seconds S] [--exit-code C] [--exit-codes C1,C2,... --count-file F]
//	workload sidecar [--on-sigterm exit:C|ignore|deliver:PORT] [--listen PORT]
//
// main runs S seconds (default 3, fractions allowed) then exits with code C
// (default 0). With --exit-codes, its n-th run (counted in file F, which must
// outlive the container: an emptyDir) exits with the n-th code, the last one
// repeating: a main that fails once, then succeeds, across kubelet restarts. sidecar runs until SIGTERM, then exits with code C (default
// exit:0), or with ignore keeps running until SIGKILL. A log shipper and
// the proxy it ships through: with --listen the sidecar acknowledges each
// line sent to 127.0.0.1:PORT (the pod's shared loopback); with
// deliver:PORT, on SIGTERM it sends its last line there and exits 0 if the
// line was acknowledged, 3 if it was lost (the proxy already gone). Flags
// take their value as the next argument or after "="; unknown flags are
// errors.
package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Modes.
const (
	Main    = "main"
	Sidecar = "sidecar"
)

// Behaviour is what a workload container does.
type Behaviour struct {
	Mode string
	// Main mode: run for Duration, then exit with ExitCode.
	Duration time.Duration
	ExitCode int
	// ExitCodes of successive runs, counted in CountFile; empty: ExitCode.
	ExitCodes []int
	CountFile string
	// Sidecar mode: on SIGTERM exit with SIGTERMExitCode, unless
	// IgnoreSIGTERM.
	SIGTERMExitCode int
	IgnoreSIGTERM   bool
	// ListenPort: acknowledge lines on 127.0.0.1:ListenPort (a proxy).
	ListenPort int
	// DeliverPort: on SIGTERM, deliver the last line to
	// 127.0.0.1:DeliverPort and exit 0, or ExitLost if it was lost.
	DeliverPort int
}

// ExitLost is a shipper's exit code when its last line was not accepted.
const ExitLost = 3

// Parse reads args (without the program name). A leading "workload" or
// "/workload" (the command, when a pod puts it in args) is skipped.
func Parse(args []string) (Behaviour, error) {
	if len(args) > 0 && (args[0] == "workload" || strings.HasSuffix(args[0], "/workload")) {
		args = args[1:]
	}
	if len(args) == 0 {
		return Behaviour{}, fmt.Errorf("missing mode: want %q or %q", Main, Sidecar)
	}
	b := Behaviour{Mode: args[0]}
	switch b.Mode {
	case Main:
		b.Duration = 3 * time.Second
	case Sidecar:
	default:
		return Behaviour{}, fmt.Errorf("unknown mode %q: want %q or %q", b.Mode, Main, Sidecar)
	}
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		name, val, hasVal := strings.Cut(rest[i], "=")
		if !hasVal {
			if i+1 >= len(rest) {
				return Behaviour{}, fmt.Errorf("flag %s needs a value", name)
			}
			i++
			val = rest[i]
		}
		if err := b.set(name, val); err != nil {
			return Behaviour{}, err
		}
	}
	if (len(b.ExitCodes) > 0) != (b.CountFile != "") {
		return Behaviour{}, fmt.Errorf("--exit-codes and --count-file go together")
	}
	return b, nil
}

func (b *Behaviour) set(name, val string) error {
	switch {
	case b.Mode == Main && name == "--seconds":
		s, err := strconv.ParseFloat(val, 64)
		if err != nil || s < 0 {
			return fmt.Errorf("--seconds %q: want a non-negative number", val)
		}
		b.Duration = time.Duration(s * float64(time.Second))
	case b.Mode == Main && name == "--exit-code":
		c, err := exitCode(val)
		if err != nil {
			return fmt.Errorf("--exit-code: %w", err)
		}
		b.ExitCode = c
	case b.Mode == Main && name == "--exit-codes":
		b.ExitCodes = nil
		for _, f := range strings.Split(val, ",") {
			c, err := exitCode(f)
			if err != nil {
				return fmt.Errorf("--exit-codes: %w", err)
			}
			b.ExitCodes = append(b.ExitCodes, c)
		}
	case b.Mode == Main && name == "--count-file":
		if val == "" {
			return fmt.Errorf("--count-file: want a path")
		}
		b.CountFile = val
	case b.Mode == Sidecar && name == "--listen":
		port, err := portNumber(val)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		b.ListenPort = port
	case b.Mode == Sidecar && name == "--on-sigterm":
		if val == "ignore" {
			b.IgnoreSIGTERM = true
			return nil
		}
		if p, ok := strings.CutPrefix(val, "deliver:"); ok {
			port, err := portNumber(p)
			if err != nil {
				return fmt.Errorf("--on-sigterm: %w", err)
			}
			b.DeliverPort = port
			return nil
		}
		code, ok := strings.CutPrefix(val, "exit:")
		if !ok {
			return fmt.Errorf("--on-sigterm %q: want exit:C, ignore or deliver:PORT", val)
		}
		c, err := exitCode(code)
		if err != nil {
			return fmt.Errorf("--on-sigterm: %w", err)
		}
		b.SIGTERMExitCode = c
	default:
		return fmt.Errorf("unknown flag %s for mode %s", name, b.Mode)
	}
	return nil
}

func portNumber(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q: want 1..65535", s)
	}
	return p, nil
}

func exitCode(s string) (int, error) {
	c, err := strconv.Atoi(s)
	if err != nil || c < 0 || c > 255 {
		return 0, fmt.Errorf("exit code %q: want 0..255", s)
	}
	return c, nil
}

// Args renders b back into argv (without the program name), so tests and
// generators build pod specs from values rather than strings.
func (b Behaviour) Args() []string {
	if b.Mode == Main {
		args := []string{Main, "--seconds", strconv.FormatFloat(b.Duration.Seconds(), 'f', -1, 64), "--exit-code", strconv.Itoa(b.ExitCode)}
		if len(b.ExitCodes) > 0 {
			codes := make([]string, len(b.ExitCodes))
			for i, c := range b.ExitCodes {
				codes[i] = strconv.Itoa(c)
			}
			args = append(args, "--exit-codes", strings.Join(codes, ","), "--count-file", b.CountFile)
		}
		return args
	}
	args := []string{Sidecar, "--on-sigterm", "exit:" + strconv.Itoa(b.SIGTERMExitCode)}
	switch {
	case b.IgnoreSIGTERM:
		args[2] = "ignore"
	case b.DeliverPort != 0:
		args[2] = "deliver:" + strconv.Itoa(b.DeliverPort)
	}
	if b.ListenPort != 0 {
		args = append(args, "--listen", strconv.Itoa(b.ListenPort))
	}
	return args
}
