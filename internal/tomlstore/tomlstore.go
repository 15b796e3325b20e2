package tomlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/kiln-dev/kiln/internal/atomicfile"
	"github.com/kiln-dev/kiln/internal/filelock"
)

// FormatError says why a file is not a valid store file. Where is "line L,
// column C", a store's own locator ("record 3"), or empty.
type FormatError struct {
	Where, Msg string
}

func (e *FormatError) Error() string {
	if e.Where == "" {
		return e.Msg
	}
	return e.Where + ": " + e.Msg
}

// NewerSchemaError is a file whose schema is newer than the reader's.
type NewerSchemaError struct {
	Found, Supported int64
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("schema %d is newer than schema %d, the newest this kiln reads", e.Found, e.Supported)
}

// Decode decodes data into v after checking its top-level "schema" number: a
// missing or older schema is a *FormatError, a newer one a *NewerSchemaError.
// Fields v does not declare, syntax errors and values that do not fit their
// field are *FormatErrors with the line and column.
func Decode(data []byte, schema int64, v any) error {
	var head struct {
		Schema *int64 `toml:"schema"`
	}
	if err := toml.Unmarshal(data, &head); err != nil {
		return formatError(err)
	}
	switch {
	case head.Schema == nil:
		return &FormatError{Msg: fmt.Sprintf("no schema line (want schema = %d)", schema)}
	case *head.Schema > schema:
		return &NewerSchemaError{Found: *head.Schema, Supported: schema}
	case *head.Schema != schema:
		return &FormatError{Msg: fmt.Sprintf("schema %d, want %d", *head.Schema, schema)}
	}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return formatError(err)
	}
	return nil
}

func formatError(err error) error {
	var se *toml.StrictMissingError
	if errors.As(err, &se) && len(se.Errors) > 0 {
		e := &se.Errors[0]
		return &FormatError{position(e), "unknown field " + strings.Join(e.Key(), ".")}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		return &FormatError{position(de), strings.TrimPrefix(de.Error(), "toml: ")}
	}
	return &FormatError{Msg: strings.TrimPrefix(err.Error(), "toml: ")}
}

func position(e *toml.DecodeError) string {
	row, col := e.Position()
	return fmt.Sprintf("line %d, column %d", row, col)
}

// Encode marshals v as TOML.
func Encode(v any) ([]byte, error) { return toml.Marshal(v) }

// Read returns the file's content; a missing file gives nil and exists false.
func Read(path string) (data []byte, exists bool, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// Update replaces path with merge's result on what the file holds now. It
// creates path's directory (each new directory made durable in its parent),
// takes the file's lock (waiting until ctx is done), removes temporary files
// earlier writers left when they died, reads the file (nil and exists false
// when missing), calls merge, and writes its result atomically and durably.
//
// When path is a symbolic link, the link's target is replaced and the link
// stays a link (the lock is taken on the target, so every name of one file
// shares one lock). An existing file keeps its mode; a new one gets perm. When
// merge fails, nothing is written.
func Update(ctx context.Context, path string, perm fs.FileMode, merge func(current []byte, exists bool) ([]byte, error)) error {
	target, err := atomicfile.Resolve(path)
	if err != nil {
		return err
	}
	if err := atomicfile.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	lock, err := filelock.Acquire(ctx, target)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if _, err := atomicfile.RemoveTemps(target); err != nil {
		return err
	}
	current, exists, err := Read(target)
	if err != nil {
		return fmt.Errorf("read %s: %w. Fix: make it readable", target, err)
	}
	if exists {
		st, err := os.Stat(target)
		if err != nil {
			return fmt.Errorf("stat %s: %w", target, err)
		}
		perm = st.Mode().Perm()
	}
	next, err := merge(current, exists)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(target, next, perm); err != nil {
		return err
	}
	return lock.Unlock()
}

// DecodeSchemas is Decode for a store that reads schemas oldest through
// newest: it returns the file's schema. A schema older than oldest, or none,
// is a *FormatError; a newer one than newest a *NewerSchemaError.
func DecodeSchemas(data []byte, oldest, newest int64, v any) (int64, error) {
	var head struct {
		Schema *int64 `toml:"schema"`
	}
	if err := toml.Unmarshal(data, &head); err != nil {
		return 0, formatError(err)
	}
	switch {
	case head.Schema == nil:
		return 0, &FormatError{Msg: fmt.Sprintf("no schema line (want schema = %d)", newest)}
	case *head.Schema > newest:
		return 0, &NewerSchemaError{Found: *head.Schema, Supported: newest}
	case *head.Schema < oldest:
		return 0, &FormatError{Msg: fmt.Sprintf("schema %d, want %d to %d", *head.Schema, oldest, newest)}
	}
	return *head.Schema, Decode(data, *head.Schema, v)
}
