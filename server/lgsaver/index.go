package lgsaver

import (
	"context"
	"errors"
	"sync"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// lgIndexMax bounds the thread namespaces the index keeps.
const lgIndexMax = 256

// lgIndex keeps, in this process, the head state of the thread
// namespaces being written (the state a put patches against), and the
// LangGraph checkpoint ids of those whose history it had to walk. A
// checkpoint id is found through the store's index of external ids
// (store.ExternalIDs, format 8): one lookup, in any process. Only a store
// without that index, or a miss that may be a row stored before it (an
// encrypted store's upgrade cannot read the ids it would copy), walks a
// namespace: the checkpoints newer than those already walked (once per
// namespace and process, the whole history; after that, what others
// appended). What it returns is checked against the checkpoint read, so a
// thread deleted and made again, or pruned, by another process is never
// answered with a wrong checkpoint.
type lgIndex struct {
	mu  sync.Mutex
	nss map[lgKey]*lgNS
}

type lgKey struct{ thread, ns string }

// lgNS is what the index knows of one thread namespace; its mutex also
// orders the puts of this process on the namespace.
type lgNS struct {
	mu  sync.Mutex
	ids map[string]int64
	// top: every checkpoint at or below it is in ids.
	top int64
	// head is the seq whose state is kept (0: none), headID its LangGraph id.
	head   int64
	headID string
	state  state.Doc
}

// get returns the entry of a thread namespace, made if needed.
func (x *lgIndex) get(thread, ns string) *lgNS {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.nss == nil {
		x.nss = map[lgKey]*lgNS{}
	}
	k := lgKey{thread, ns}
	n := x.nss[k]
	if n == nil {
		if len(x.nss) >= lgIndexMax {
			for old := range x.nss { // any one: it is only a cache
				delete(x.nss, old)
				break
			}
		}
		n = &lgNS{ids: map[string]int64{}}
		x.nss[k] = n
	}
	return n
}

// forget drops what the index knows of a thread.
func (x *lgIndex) forget(thread string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.nss {
		if k.thread == thread {
			delete(x.nss, k)
		}
	}
}

// seq finds the seq of checkpoint id; n.mu must be held. ok is false when
// the namespace has no such checkpoint. x is the store's index of
// external ids (nil: none); walk lets a miss there walk the namespace
// (see lgIndex): a put's check that its id is new does not.
func (n *lgNS) seq(ctx context.Context, x store.ExternalIDs, st store.Store, thread, ns, id string, walk bool) (int64, bool, error) {
	if seq, ok := n.ids[id]; ok {
		return seq, true, nil
	}
	if x != nil {
		cp, err := x.ByExternalID(ctx, thread, ns, id)
		if err == nil {
			return cp.Seq, true, nil
		}
		if !errors.Is(err, store.ErrNotFound) || !walk {
			return 0, false, ignoreNotFound(err)
		}
	}
	if err := n.catchUp(ctx, st, thread, ns); err != nil {
		return 0, false, err
	}
	seq, ok := n.ids[id]
	return seq, ok, nil
}

// catchUp reads the ids of the checkpoints above top.
func (n *lgNS) catchUp(ctx context.Context, st store.Store, thread, ns string) error {
	head := int64(0)
	for cp, err := range st.History(ctx, store.HistoryRequest{Thread: thread, Namespace: ns, PageSize: 500}) {
		if err != nil {
			return err
		}
		if head == 0 {
			head = cp.Seq
			if head < n.top { // the namespace was made again
				n.ids, n.top, n.head = map[string]int64{}, 0, 0
			}
		}
		if cp.Seq <= n.top {
			break
		}
		if rec, ok := lgRecordOf(cp.Meta); ok {
			n.ids[rec.Checkpoint.ID] = cp.Seq
		}
	}
	if head == 0 {
		n.ids, n.head = map[string]int64{}, 0
	}
	n.top = head
	return nil
}

// add records a checkpoint this process wrote, with its state.
func (n *lgNS) add(seq int64, id string, d state.Doc) {
	n.ids[id] = seq
	if n.top == seq-1 {
		n.top = seq
	}
	n.head, n.headID, n.state = seq, id, d
}

// ignoreNotFound is err unless it is store.ErrNotFound.
func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
