package driver

import (
	"fmt"
	"strings"
)

// ThreadKey is the key under which the store keeps a tenant's thread:
// "tenant/id", or the id itself for the empty tenant (a server without
// authentication). Ids never hold a '/', so two tenants' threads of the
// same id are two keys and a key names one tenant's thread.
func ThreadKey(tenant, id string) string {
	if tenant == "" {
		return id
	}
	return tenant + "/" + id
}

// KeyTakenError is the ErrConflict of a store that cannot move a tenant's
// thread kept under its bare id to its key (format 7), because another
// thread has that key.
func KeyTakenError(tenant, id string) error {
	return fmt.Errorf("%w: thread %q of tenant %q cannot take its key %q, which another thread has: delete one of them (or copy it to another id first)",
		ErrConflict, id, tenant, ThreadKey(tenant, id))
}

// SplitThreadKey is ThreadKey's inverse: the tenant and the id a key
// names.
func SplitThreadKey(key string) (tenant, id string) {
	if t, rest, ok := strings.Cut(key, "/"); ok {
		return t, rest
	}
	return "", key
}
