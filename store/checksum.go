package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errRowSum = errors.New("row checksum mismatch: a column was changed outside Cairn")

// verifyRow checks a row read from a backend against its checksum. On a
// mismatch it names the damaged column when it can tell: a blob that fails
// its own CRC, metadata that is not JSON; otherwise "row".
func verifyRow(r *driver.Row) error {
	if driver.RowChecksum(r) == r.Sum {
		return nil
	}
	ce := &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "row", Err: errRowSum}
	switch {
	case !r.Status.Valid():
		ce.Err = fmt.Errorf("%w: status %d", errRowSum, r.Status)
	case len(r.Meta) > 0 && !isSealed(r.Meta) && !json.Valid(r.Meta):
		ce.What = "metadata"
	case isSealed(r.Patch):
		// A sealed patch is checked when it is opened.
	default:
		if _, err := decodeBlob(r.Patch); err != nil {
			ce.What, ce.Err = "patch", fmt.Errorf("%w: %v", errRowSum, err)
		}
	}
	return ce
}

// verifyThread checks a thread record read from a backend.
func verifyThread(t *driver.ThreadRecord) error {
	if driver.ThreadChecksum(t) != t.Sum {
		return &CorruptError{Thread: t.ID, What: "thread record", Err: fmt.Errorf("thread checksum mismatch: a column was changed outside Cairn")}
	}
	return nil
}
