package readfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Max is the largest file Read and FromRoot read: far above any agent
// file, pipeline, schema, script or input a run is given.
const Max = 16 << 20

var (
	// ErrNotRegular: the path names a directory, device, FIFO or socket.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is larger than Max.
	ErrTooLarge = errors.New("file too large")
)

// Read reads the regular file at path, at most Max bytes.
func Read(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := check(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(path, f)
}

// FromRoot reads the regular file name inside root, at most Max bytes.
func FromRoot(root *os.Root, name string) ([]byte, error) {
	fi, err := root.Stat(name)
	if err != nil {
		return nil, plainOp(err)
	}
	if err := check(name, fi); err != nil {
		return nil, err
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, plainOp(err)
	}
	defer f.Close()
	return readAll(name, f)
}

func check(name string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: it is a %s", ErrNotRegular, kind(fi.Mode()))}
	}
	if fi.Size() > Max {
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, fi.Size(), Max)}
	}
	return nil
}

// readAll reads f, checking again what was opened (the path may have been
// swapped since it was checked).
func readAll(name string, f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := check(name, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, Max+1))
	if err != nil {
		return nil, err
	}
	if len(b) > Max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, Max)}
	}
	return b, nil
}

// kind names a file mode's type for error messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// rootOps maps the operations os.Root's errors name to those of the
// package os functions they stand for.
var rootOps = map[string]string{"statat": "stat", "openat": "open"}

// plainOp names an os.Root error's operation as os.Stat and os.Open name
// theirs, so that a message reads "stat schemas/x.json: no such file or
// directory", not "statat …". The error stays an *fs.PathError with the
// same cause.
func plainOp(err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err
	}
	op, ok := rootOps[pe.Op]
	if !ok {
		return err
	}
	return &fs.PathError{Op: op, Path: pe.Path, Err: pe.Err}
}
