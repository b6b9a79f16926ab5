package main

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// durationsAsText wraps log so that time.Duration values are written as
// text ("2s"), as the text format does, rather than as the number of
// nanoseconds that JSON encoding gives them (2000000000). Every logger
// derived from it with With or Named does the same.
func durationsAsText(log hclog.Logger) hclog.Logger { return textDurations{log} }

type textDurations struct{ hclog.Logger }

func durationArgs(args []any) []any {
	var out []any
	for i, a := range args {
		d, ok := a.(time.Duration)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = d.String()
	}
	if out == nil {
		return args
	}
	return out
}

func (l textDurations) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, durationArgs(args)...)
}
func (l textDurations) Trace(msg string, args ...any) { l.Logger.Trace(msg, durationArgs(args)...) }
func (l textDurations) Debug(msg string, args ...any) { l.Logger.Debug(msg, durationArgs(args)...) }
func (l textDurations) Info(msg string, args ...any)  { l.Logger.Info(msg, durationArgs(args)...) }
func (l textDurations) Warn(msg string, args ...any)  { l.Logger.Warn(msg, durationArgs(args)...) }
func (l textDurations) Error(msg string, args ...any) { l.Logger.Error(msg, durationArgs(args)...) }
func (l textDurations) With(args ...any) hclog.Logger {
	return textDurations{l.Logger.With(durationArgs(args)...)}
}
func (l textDurations) Named(name string) hclog.Logger { return textDurations{l.Logger.Named(name)} }
func (l textDurations) ResetNamed(name string) hclog.Logger {
	return textDurations{l.Logger.ResetNamed(name)}
}
