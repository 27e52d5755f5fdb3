package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/store/driver"
)

// Limits of item names, checked on every backend alike.
const (
	maxNamespaceDepth = 64
	maxLabelBytes     = 256
	maxKeyBytes       = 1024
)

// ValidateItemNamespace checks a namespace as LangGraph does (labels are
// non-empty and hold no "."; the first is not "langgraph"), plus what
// every backend can store: at most 64 labels of valid UTF-8 without NUL,
// each at most 256 bytes. what names it in errors.
func ValidateItemNamespace(ns []string, what string) error {
	if len(ns) == 0 {
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, what)
	}
	if ns[0] == "langgraph" {
		return fmt.Errorf("%w: %s: the first label cannot be \"langgraph\"", ErrInvalidArgument, what)
	}
	return ValidateItemLabels(ns, what)
}

// ValidateItemLabels checks the labels of a namespace prefix or suffix,
// which may be none: what ValidateItemNamespace checks of each label.
func ValidateItemLabels(ns []string, what string) error {
	if len(ns) > maxNamespaceDepth {
		return fmt.Errorf("%w: %s has %d labels (at most %d)", ErrInvalidArgument, what, len(ns), maxNamespaceDepth)
	}
	for i, l := range ns {
		switch {
		case l == "":
			return fmt.Errorf("%w: %s[%d] is empty", ErrInvalidArgument, what, i)
		case strings.Contains(l, "."):
			return fmt.Errorf("%w: %s[%d] %q holds a period: namespace labels cannot", ErrInvalidArgument, what, i, l)
		case len(l) > maxLabelBytes:
			return fmt.Errorf("%w: %s[%d] is %d bytes (at most %d)", ErrInvalidArgument, what, i, len(l), maxLabelBytes)
		case !utf8.ValidString(l) || strings.ContainsRune(l, 0):
			return fmt.Errorf("%w: %s[%d] %q is not valid UTF-8 text", ErrInvalidArgument, what, i, l)
		}
	}
	return nil
}

// ValidateItemKey checks an item key: 1 to 1024 bytes of UTF-8 without
// NUL.
func ValidateItemKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidArgument)
	case len(key) > maxKeyBytes:
		return fmt.Errorf("%w: key is %d bytes (at most %d)", ErrInvalidArgument, len(key), maxKeyBytes)
	case !utf8.ValidString(key) || strings.ContainsRune(key, 0):
		return fmt.Errorf("%w: key %q is not valid UTF-8 text", ErrInvalidArgument, key)
	}
	return nil
}

// SystemTenant is the tenant under which Cairn keeps data of one kind
// ("assistants") for tenant as items: "assistants#acme". No tenant id
// holds a "#", so no API key's tenant reads or writes them through the
// item API, and each tenant's are its own.
func SystemTenant(kind, tenant string) string {
	return kind + "#" + tenant
}

func validateTenant(tenant string) error {
	if kind, of, ok := strings.Cut(tenant, "#"); ok && (kind == "assistants" || kind == "webhooks" || kind == "crons") {
		tenant = of // a system tenant (SystemTenant)
	}
	if tenant == "" {
		return nil
	}
	if err := ValidateID(tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	return nil
}

// checkItem checks what names one item.
func checkItem(tenant string, ns []string, key string) (driver.ItemKey, error) {
	if err := validateTenant(tenant); err != nil {
		return driver.ItemKey{}, err
	}
	if err := ValidateItemNamespace(ns, "namespace"); err != nil {
		return driver.ItemKey{}, err
	}
	if err := ValidateItemKey(key); err != nil {
		return driver.ItemKey{}, err
	}
	return driver.ItemKey{Tenant: tenant, Namespace: JoinNamespace(ns), Key: key}, nil
}

func checkPage(limit, offset int) error {
	if limit < 0 || offset < 0 {
		return fmt.Errorf("%w: limit and offset must not be negative", ErrInvalidArgument)
	}
	return nil
}
