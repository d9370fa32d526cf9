package virtualnode

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// slogLogger adapts virtual-kubelet's logger interface to log/slog, so its
// pod-controller messages (status update failures, provider errors) land in
// the node's log; virtual-kubelet discards them by default.
type slogLogger struct{ l *slog.Logger }

var _ vklog.Logger = slogLogger{}

func (s slogLogger) Debug(a ...any)                         { s.l.Debug(fmt.Sprint(a...)) }
func (s slogLogger) Debugf(f string, a ...any)              { s.l.Debug(fmt.Sprintf(f, a...)) }
func (s slogLogger) Info(a ...any)                          { s.l.Info(fmt.Sprint(a...)) }
func (s slogLogger) Infof(f string, a ...any)               { s.l.Info(fmt.Sprintf(f, a...)) }
func (s slogLogger) Warn(a ...any)                          { s.l.Warn(fmt.Sprint(a...)) }
func (s slogLogger) Warnf(f string, a ...any)               { s.l.Warn(fmt.Sprintf(f, a...)) }
func (s slogLogger) Error(a ...any)                         { s.l.Error(fmt.Sprint(a...)) }
func (s slogLogger) Errorf(f string, a ...any)              { s.l.Error(fmt.Sprintf(f, a...)) }
func (s slogLogger) Fatal(a ...any)                         { s.l.Error(fmt.Sprint(a...)); os.Exit(1) }
func (s slogLogger) Fatalf(f string, a ...any)              { s.l.Error(fmt.Sprintf(f, a...)); os.Exit(1) }
func (s slogLogger) WithField(k string, v any) vklog.Logger { return slogLogger{s.l.With(k, v)} }
func (s slogLogger) WithError(err error) vklog.Logger       { return slogLogger{s.l.With("err", err)} }
func (s slogLogger) WithFields(f vklog.Fields) vklog.Logger {
	args := make([]any, 0, 2*len(f))
	for k, v := range f {
		args = append(args, k, v)
	}
	return slogLogger{s.l.With(args...)}
}

// withVKLogger makes virtual-kubelet log through l in ctx's call tree.
func withVKLogger(ctx context.Context, l *slog.Logger) context.Context {
	return vklog.WithLogger(ctx, slogLogger{l})
}
