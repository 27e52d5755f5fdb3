package store

import "fmt"

// ValidateThreadID checks a thread id: 1 to 128 characters from
// [A-Za-z0-9._:-], starting with a letter or digit.
func ValidateThreadID(id string) error {
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
