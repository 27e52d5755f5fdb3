package runs

import (
	"context"
	"errors"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// ThreadKey is the store's key of the request's tenant's thread id.
func ThreadKey(ctx context.Context, id string) string {
	return store.ThreadKey(TenantOf(ctx), id)
}

// APIThreadID is the id the API shows for a thread the store keeps under
// key: the tenant's own id, without the tenant.
func APIThreadID(key string) string {
	_, id := store.SplitThreadKey(key)
	return id
}

// APIText is text about a thread (an error's message, which names its
// steps by task key, thread/seq/node) with the thread's key written as the
// id its tenant knows: a tenant never sees the key, which names it.
func APIText(key, text string) string {
	id := APIThreadID(key)
	if id == key {
		return text
	}
	return strings.ReplaceAll(text, key, id)
}

// Thread returns a thread of the request's tenant: another tenant's is
// not found, as a missing one is.
func (s *Service) Thread(ctx context.Context, id string) (store.Thread, error) {
	if err := store.ValidateID(id); err != nil {
		return store.Thread{}, invalid("thread_id", "%v", err)
	}
	th, err := s.store.Thread(ctx, ThreadKey(ctx, id))
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Tenant != TenantOf(ctx)) {
		return store.Thread{}, newError(ErrNotFound, "thread %q not found", id)
	}
	return th, err
}

type tenantKey struct{}

func WithTenant(ctx context.Context, t string) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// TenantOf is the tenant a request acts for.
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}
