package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A store with a keyring seals every blob it writes; a store opened on the
// same data without the key refuses to read it; rotating to a new key and
// rekeying lets the old key go.
func ExampleKeyringFromEnv() {
	ctx := context.Background()
	oldKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	newKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	env := map[string]string{store.EnvEncryptionKeys: oldKey}
	ring, err := store.KeyringFromEnv(func(k string) string { return env[k] })
	if err != nil {
		panic(err)
	}
	b := inmem.New()
	s := store.New(b, store.Options{Keyring: ring})
	doc, patch, _ := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"plan": "secret"})
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "t", Patch: patch, State: doc}); err != nil {
		panic(err)
	}

	// The same data without the key: ErrNoKey, never the ciphertext.
	_, err = store.New(b, store.Options{}).Load(ctx, store.LoadRequest{Thread: "t"})
	fmt.Println(errors.Is(err, store.ErrNoKey))

	// Rotate: the new key first, the old one still listed; rekey.
	env[store.EnvEncryptionKeys] = newKey + "," + oldKey
	rotated, _ := store.KeyringFromEnv(func(k string) string { return env[k] })
	st, err := store.New(b, store.Options{Keyring: rotated}).Rekey(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Rewritten["checkpoints"], st.Rewritten["snapshots"])

	// The old key can go.
	onlyNew, _ := store.ParseKeyring(newKey)
	cp, err := store.New(b, store.Options{Keyring: onlyNew}).Load(ctx, store.LoadRequest{Thread: "t"})
	fmt.Println(cp.State, err)
	// Output:
	// true
	// 1 1
	// {"plan":"secret"} <nil>
}
