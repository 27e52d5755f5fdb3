package memory_test

import (
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/memory"
	"github.com/cairn-dev/cairn/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, o store.Options) store.Store { return memory.Open(o) },
		Corrupt: func(t *testing.T, s store.Store, ref store.Ref, column string) {
			b := s.(*store.Engine).Backend().(*memory.Backend)
			ok := b.Tamper(ref.Thread, ref.Namespace, ref.Seq, func(r *store.Row) {
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
	})
}
