package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"
)

// traceKeep is how many recent lines a violation report can draw on.
const traceKeep = 4096

// Trace is the run's record: every line is hashed (same seed and scenario,
// same hash), the recent ones are kept for a violation report, and all or one
// pod's lines can be written out for a replay.
type Trace struct {
	s      *Sim
	hash   hash.Hash
	lines  int
	ring   []string
	next   int
	out    io.Writer
	filter string
	buf    []byte
	// lastPod is the most recent subject other than the controller.
	lastPod string
}

func newTrace(s *Sim, out io.Writer, pod string) *Trace {
	return &Trace{s: s, hash: sha256.New(), ring: make([]string, 0, traceKeep), out: out, filter: pod}
}

// add records one line: virtual time, step, subject (usually a pod key), text.
func (t *Trace) add(subject, format string, args ...any) {
	if subject != "controller" {
		t.lastPod = subject
	}
	t.buf = t.buf[:0]
	t.buf = fmt.Appendf(t.buf, "%s #%d %s ", fmtDur(t.s.now().Sub(Epoch)), t.s.step, subject)
	t.buf = fmt.Appendf(t.buf, format, args...)
	t.buf = append(t.buf, '\n')
	t.hash.Write(t.buf)
	t.lines++
	line := string(t.buf)
	if len(t.ring) < traceKeep {
		t.ring = append(t.ring, line)
	} else {
		t.ring[t.next] = line
		t.next = (t.next + 1) % traceKeep
	}
	if t.out != nil && (t.filter == "" || subject == t.filter) {
		io.WriteString(t.out, line)
	}
}

// Sum is the hex sha256 of every line so far.
func (t *Trace) Sum() string { return hex.EncodeToString(t.hash.Sum(nil)) }

// about returns the kept lines that mention subject, oldest first.
func (t *Trace) about(subject string) []string {
	var out []string
	for i := 0; i < len(t.ring); i++ {
		line := t.ring[(t.next+i)%len(t.ring)]
		if strings.Contains(line, " "+subject+" ") || strings.Contains(line, subject+"-") {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return out
}

func fmtDur(d interface{ Seconds() float64 }) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}
