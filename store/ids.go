package store

import (
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/store/driver"
)

// ValidateThreadID checks a thread id as the store keeps it: an id (see
// ValidateID), or a tenant's thread key, "tenant/id" (ThreadKey), whose
// two parts are ids.
func ValidateThreadID(id string) error {
	if tenant, rest, ok := strings.Cut(id, "/"); ok {
		if err := ValidateID(tenant); err != nil {
			return fmt.Errorf("thread key %q: tenant: %w", id, err)
		}
		if err := ValidateID(rest); err != nil {
			return fmt.Errorf("thread key %q: %w", id, err)
		}
		return nil
	}
	return ValidateID(id)
}

// keyTenant is the tenant of a thread with key key, given as tenant: the
// key's own (ThreadKey), which a tenant given must equal. A legacy thread,
// kept under its bare id, has the tenant it was given.
func keyTenant(key, tenant string) (string, error) {
	kt, _ := SplitThreadKey(key)
	switch {
	case kt == "":
		return tenant, nil
	case tenant == "" || tenant == kt:
		return kt, nil
	}
	return "", fmt.Errorf("%w: thread key %q belongs to tenant %q, not %q", ErrInvalidArgument, key, kt, tenant)
}

// ValidateID checks an id (a thread's as the API names it, a tenant's, an
// assistant's): 1 to 128 characters from [A-Za-z0-9._:-], starting with a
// letter or digit.
func ValidateID(id string) error {
	if len(id) == 0 || len(id) > 128 || !alnum(id[0]) {
		return fmt.Errorf("%w: thread id %q must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", ErrInvalidID, id)
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return fmt.Errorf("%w: thread id %q has %q at %d; allowed: [A-Za-z0-9._:-]", ErrInvalidID, id, c, i)
		}
	}
	return nil
}

// ValidateNamespace checks a namespace: empty (the root), or 1 to 256
// characters from [A-Za-z0-9._:/|-] starting with a letter or digit.
func ValidateNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if len(ns) > 256 || !alnum(ns[0]) {
		return fmt.Errorf("%w: namespace %q must match ^[A-Za-z0-9][A-Za-z0-9._:/|-]{0,255}$", ErrInvalidID, ns)
	}
	for i := 1; i < len(ns); i++ {
		if c := ns[i]; !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' && c != '/' && c != '|' {
			return fmt.Errorf("%w: namespace %q has %q at %d", ErrInvalidID, ns, c, i)
		}
	}
	return nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ThreadKey is the key under which the store keeps a tenant's thread:
// "tenant/id", or the id itself for the empty tenant (a server without
// authentication). Ids never hold a '/', so two tenants' threads of the
// same id are two keys and a key names one tenant's thread.
func ThreadKey(tenant, id string) string { return driver.ThreadKey(tenant, id) }

// SplitThreadKey is ThreadKey's inverse: the tenant and the id a key
// names.
func SplitThreadKey(key string) (tenant, id string) { return driver.SplitThreadKey(key) }
