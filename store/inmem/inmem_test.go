package inmem_test

import (
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, o store.Options) store.Store { return inmem.Open(o) },
		Corrupt: func(t *testing.T, s store.Store, ref store.Ref, column string) {
			b := s.(*store.Engine).Backend().(*inmem.Backend)
			ok := b.Tamper(ref.Thread, ref.Namespace, ref.Seq, func(r *driver.Row) {
				switch column {
				case "patch":
					r.Patch[len(r.Patch)-1] ^= 0x40
				case "snapshot":
					r.Snapshot[len(r.Snapshot)/2] ^= 0x01
				case "meta":
					r.Meta = []byte(`{"nodes":`)
				}
			})
			if !ok {
				t.Fatalf("no row %+v", ref)
			}
		},
		Edit: edit,
	})
}

// edit changes a stored field as storetest.Harness.Edit describes.
func edit(t *testing.T, s store.Store, ref store.Ref, column string, value any) {
	t.Helper()
	b := s.(*store.Engine).Backend().(*inmem.Backend)
	inc, _ := value.(storetest.Inc)
	add := func(p *int64) {
		if v, ok := value.(int64); ok {
			*p = v
			return
		}
		*p += int64(inc)
	}
	ok := false
	switch column {
	case "thread.id", "thread.tenant", "thread.metadata", "thread.created_at":
		ok = b.TamperThread(ref.Thread, func(r *driver.ThreadRecord) {
			switch column {
			case "thread.id":
				r.ID = value.(string)
			case "thread.tenant":
				r.Tenant = value.(string)
			case "thread.metadata":
				r.Metadata = []byte(value.(string))
			case "thread.created_at":
				add(&r.CreatedAt)
			}
		})
	case "thread":
		ok = b.MoveRow(ref, store.Ref{Thread: value.(string), Namespace: ref.Namespace, Seq: ref.Seq})
	case "ns":
		ok = b.MoveRow(ref, store.Ref{Thread: ref.Thread, Namespace: value.(string), Seq: ref.Seq})
	case "seq":
		ok = b.MoveRow(ref, store.Ref{Thread: ref.Thread, Namespace: ref.Namespace, Seq: ref.Seq + int64(inc)})
	default:
		ok = b.Tamper(ref.Thread, ref.Namespace, ref.Seq, func(r *driver.Row) {
			switch column {
			case "parent":
				add(&r.Parent)
			case "base":
				add(&r.Base)
			case "since":
				add(&r.Since)
			case "base_size":
				add(&r.BaseSize)
			case "created_at":
				add(&r.CreatedAt)
			case "status":
				r.Status = store.Status(value.(int64))
			case "has_snapshot":
				r.HasSnapshot = value.(bool)
			case "meta":
				r.Meta = value.([]byte)
			case "patch":
				r.Patch = value.([]byte)
			case "snapshot":
				r.Snapshot = value.([]byte)
			default:
				t.Fatalf("unknown column %q", column)
			}
		})
	}
	if !ok {
		t.Fatalf("edit %s of %+v: no such row", column, ref)
	}
}

func TestConformanceEncrypted(t *testing.T) {
	storetest.RunEncrypted(t, storetest.Harness{
		Open: func(t *testing.T, o store.Options) store.Store { return inmem.Open(o) },
		Edit: edit,
	})
}
