package host

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogLogger is an hclog.Logger that writes to an *slog.Logger, for
// Options.Slog: levels map to slog's (Trace is LevelDebug-4), a logger's name
// is its "logger" attribute, and the slog handler decides which levels pass
// (SetLevel does nothing).
type slogLogger struct {
	// base has the With arguments, l the name too.
	base, l *slog.Logger
	name    string
	args    []any
}

// fromSlog wraps l.
func fromSlog(l *slog.Logger) hclog.Logger { return &slogLogger{base: l, l: l} }

// named is a logger of base called name, with args.
func named(base *slog.Logger, name string, args []any) *slogLogger {
	s := &slogLogger{base: base, l: base, name: name, args: args}
	if name != "" {
		s.l = base.With("logger", name)
	}
	return s
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	s.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(level hclog.Level) bool {
	return s.l.Enabled(context.Background(), slogLevel(level))
}

func (s *slogLogger) IsTrace() bool { return s.enabled(hclog.Trace) }
func (s *slogLogger) IsDebug() bool { return s.enabled(hclog.Debug) }
func (s *slogLogger) IsInfo() bool  { return s.enabled(hclog.Info) }
func (s *slogLogger) IsWarn() bool  { return s.enabled(hclog.Warn) }
func (s *slogLogger) IsError() bool { return s.enabled(hclog.Error) }

func (s *slogLogger) ImpliedArgs() []any { return s.args }

func (s *slogLogger) With(args ...any) hclog.Logger {
	return named(s.base.With(args...), s.name, append(append([]any(nil), s.args...), args...))
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	if s.name != "" {
		name = s.name + "." + name
	}
	return s.ResetNamed(name)
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger { return named(s.base, name, s.args) }

func (s *slogLogger) SetLevel(hclog.Level) {}

func (s *slogLogger) GetLevel() hclog.Level {
	for _, level := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if s.enabled(level) {
			return level
		}
	}
	return hclog.Off
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

// StandardWriter logs each line written to it at opts.ForceLevel (Info when
// unset).
func (s *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &slogWriter{s: s, level: level}
}

type slogWriter struct {
	s     *slogLogger
	level hclog.Level
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte{'\n'}) {
		w.s.Log(w.level, string(bytes.TrimRight(line, "\r")))
	}
	return len(p), nil
}
