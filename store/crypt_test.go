package store

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func testRing(t testing.TB, n ...byte) *Keyring {
	t.Helper()
	keys := make([][]byte, len(n))
	for i, v := range n {
		keys[i] = bytes.Repeat([]byte{v}, keyLen)
	}
	k, err := NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func b64(v byte, n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{v}, n)) }

func TestParseKeyring(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		ids        int
		err        string
	}{
		{"one key", b64(1, 32), 1, ""},
		{"rotation, spaces and new lines", " " + b64(2, 32) + " ,\n" + b64(1, 32) + "\n", 2, ""},
		{"unpadded", strings.TrimRight(b64(3, 32), "="), 1, ""},
		{"empty", "", 0, "holds no keys"},
		{"not base64", "zz*zz", 0, "key 1 of 1 is not base64"},
		{"short", b64(1, 32) + "," + b64(2, 16), 0, "key 2 of 2 is 16 bytes, want 32"},
		{"long", b64(1, 33), 0, "is 33 bytes"},
		{"repeated", b64(1, 32) + "," + b64(1, 32), 0, "key 2 repeats key 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeyring(tc.list)
			if tc.err != "" {
				if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrBadKey and %q", err, tc.err)
				}
				return
			}
			if err != nil || len(k.KeyIDs()) != tc.ids {
				t.Fatalf("keyring %v, %v; want %d keys", k.KeyIDs(), err, tc.ids)
			}
		})
	}
}

func TestKeyringFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if k, err := KeyringFromEnv(env(nil)); k != nil || err != nil {
		t.Fatalf("no variables: %v %v", k, err)
	}
	k, err := KeyringFromEnv(env(map[string]string{EnvEncryptionKeys: b64(7, 32)}))
	if err != nil || k.KeyIDs()[0] != testRing(t, 7).KeyIDs()[0] {
		t.Fatalf("keys: %v %v", k, err)
	}
	_, err = KeyringFromEnv(env(map[string]string{EnvEncryptionKeys: "x", EnvEncryptionKeysFile: "/f"}))
	if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), "both") {
		t.Fatalf("both set: %v", err)
	}
	_, err = KeyringFromEnv(env(map[string]string{EnvEncryptionKeysFile: t.TempDir() + "/none"}))
	if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), EnvEncryptionKeysFile) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestSealOpen: a sealed blob opens only with its key and at its place;
// every other place, a damaged byte, a plaintext blob or a missing key is
// refused.
func TestSealOpen(t *testing.T) {
	ring := testRing(t, 1)
	at := binding{kind: sealPatch, tenant: "acme", thread: "t1", ns: "sub", key: "", seq: 3}
	plain := []byte("the state of step 3")
	sealed := ring.seal(&at, plain)
	if got, err := ring.open(&at, sealed); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %q %v", got, err)
	}
	if bytes.Contains(sealed, plain) {
		t.Fatal("the plaintext is in the sealed blob")
	}
	if again := ring.seal(&at, plain); bytes.Equal(again[:sealedHeader], sealed[:sealedHeader]) {
		t.Fatal("two seals share a nonce")
	}
	moved := func(f func(b *binding)) binding { b := at; f(&b); return b }
	flip := func(i int) []byte { b := bytes.Clone(sealed); b[i] ^= 1; return b }
	for _, tc := range []struct {
		name string
		ring *Keyring
		at   binding
		blob []byte
		want error
	}{
		{"another seq", ring, moved(func(b *binding) { b.seq = 4 }), sealed, errSealAuth},
		{"another thread", ring, moved(func(b *binding) { b.thread = "t2" }), sealed, errSealAuth},
		{"another tenant", ring, moved(func(b *binding) { b.tenant = "other" }), sealed, errSealAuth},
		{"another namespace", ring, moved(func(b *binding) { b.ns = "" }), sealed, errSealAuth},
		{"another kind", ring, moved(func(b *binding) { b.kind = sealSnapshot }), sealed, errSealAuth},
		{"another key field", ring, moved(func(b *binding) { b.key = "task" }), sealed, errSealAuth},
		{"field boundary", ring, moved(func(b *binding) { b.tenant, b.thread = "acmet", "1" }), sealed, errSealAuth},
		{"damaged nonce", ring, at, flip(1 + keyIDLen), errSealAuth},
		{"damaged ciphertext", ring, at, flip(sealedHeader + 2), errSealAuth},
		{"damaged tag", ring, at, flip(len(sealed) - 1), errSealAuth},
		{"damaged key id", ring, at, flip(1), ErrNoKey},
		{"wrong key", testRing(t, 2), at, sealed, ErrNoKey},
		{"plaintext", ring, at, encodeBlob(plain, false, nil), errPlaintext},
		{"plaintext JSON", ring, at, []byte(`{"a":1}`), errPlaintext},
		{"truncated", ring, at, sealed[:sealedOverhead-1], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ring.open(&tc.at, tc.blob)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("open = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
	// Without keys, a sealed blob is ErrNoKey and a plaintext one passes.
	var none *Keyring
	if _, err := none.openBlob(&at, sealed); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no keyring: %v", err)
	}
	if got, err := none.openBlob(&at, plain); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("no keyring, plaintext: %q %v", got, err)
	}
}

// TestRotation: a ring with a new key first seals with it and still opens
// what the old key sealed; a ring of the new key alone does not.
func TestRotation(t *testing.T) {
	at := binding{kind: sealWrite, thread: "t", seq: 1}
	old := testRing(t, 1).seal(&at, []byte("{}"))
	rotated := testRing(t, 2, 1)
	if got, err := rotated.open(&at, old); err != nil || string(got) != "{}" {
		t.Fatalf("old blob with the rotated ring: %q %v", got, err)
	}
	if rotated.current(old) {
		t.Fatal("an old blob counts as current")
	}
	nw := rotated.seal(&at, []byte("{}"))
	if !rotated.current(nw) || !bytes.Equal(nw[1:1+keyIDLen], testRing(t, 2).keys[0].id[:]) {
		t.Fatal("a new blob is not sealed with the newest key")
	}
	if _, err := testRing(t, 2).open(&at, old); !errors.Is(err, ErrNoKey) {
		t.Fatalf("old blob with the new key alone: %v", err)
	}
}

func FuzzParseKeyring(f *testing.F) {
	f.Add(b64(1, 32))
	f.Add(b64(1, 32) + "," + b64(2, 32))
	f.Add(b64(1, 31) + "\n")
	f.Add("not base64 at all")
	f.Add(",,,\n\r")
	f.Fuzz(func(t *testing.T, list string) {
		k, err := ParseKeyring(list)
		if err != nil {
			if !errors.Is(err, ErrBadKey) || k != nil {
				t.Fatalf("error %v (keyring %v) does not wrap ErrBadKey", err, k)
			}
			// Key material is never in an error.
			if f := strings.TrimSpace(list); len(f) >= 12 && strings.Contains(err.Error(), f) {
				t.Fatalf("error %q holds the input", err)
			}
			return
		}
		if len(k.KeyIDs()) == 0 {
			t.Fatal("a keyring without keys")
		}
	})
}

func FuzzOpenBlob(f *testing.F) {
	ring := testRing(f, 1)
	at := binding{kind: sealPatch, tenant: "acme", thread: "t1", seq: 2}
	plain := encodeBlob([]byte(`[{"op":"add","path":"/a","value":1}]`), true, nil)
	valid := ring.seal(&at, plain)
	f.Add(valid)
	f.Add(valid[:sealedOverhead])
	f.Add(encodeBlob([]byte(`[]`), false, nil))
	f.Add([]byte{codecSealed})
	f.Fuzz(func(t *testing.T, blob []byte) {
		// Fuzzing workers are other processes, where the seed's nonce is
		// not valid's: a blob that opens must be a seal of the plaintext
		// (a changed one would be a forgery).
		got, err := ring.open(&at, blob)
		if err == nil && !bytes.Equal(got, plain) {
			t.Fatalf("a blob that was never sealed opened: %q", got)
		}
		_, _ = decodeBlob(blob)
		if meta, patch, err := splitMeta(blob); err == nil && len(meta)+len(patch) >= len(blob) {
			t.Fatalf("splitMeta(%q) = %q, %q", blob, meta, patch)
		}
	})
}

func TestCorruptErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  CorruptError
		want string
	}{
		{CorruptError{Thread: "t", Seq: 2, What: "patch", Err: errSealAuth}, `store: thread "t" seq 2: corrupt patch: authentication failed`},
		{CorruptError{Seq: 3, What: `event of run "r"`, Err: errSealAuth}, `store: seq 3: corrupt event of run "r": authentication failed`},
		{CorruptError{What: `item "k"`, Err: errPlaintext}, `store: corrupt item "k": not encrypted`},
	} {
		if got := tc.err.Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q, want it to start with %q", got, tc.want)
		}
	}
}

// TestOpenLegacyBinding: a blob sealed under a tenant's bare thread id (a
// Cairn before format 7) opens under the thread's key of the same tenant,
// reported as legacy; under any other key, tenant or place it does not,
// and a blob sealed under the key does not open under the bare id.
func TestOpenLegacyBinding(t *testing.T) {
	ring := testRing(t, 1)
	bare := binding{kind: sealPatch, tenant: "acme", thread: "x", ns: "sub", seq: 3}
	plain := []byte("the state of step 3")
	old := ring.seal(&bare, plain)
	keyed := bare
	keyed.thread = "acme/x"
	if got, legacy, err := ring.openBound(&keyed, old); err != nil || !legacy || !bytes.Equal(got, plain) {
		t.Fatalf("open under the key: %q %v %v", got, legacy, err)
	}
	moved := func(f func(b *binding)) binding { b := keyed; f(&b); return b }
	for _, tc := range []struct {
		name string
		at   binding
		blob []byte
	}{
		{"another tenant's key", moved(func(b *binding) { b.thread = "other/x" }), old},
		{"the key under another tenant", moved(func(b *binding) { b.tenant = "other" }), old},
		{"another id", moved(func(b *binding) { b.thread = "acme/y" }), old},
		{"another seq", moved(func(b *binding) { b.seq = 4 }), old},
		{"a key's blob under the bare id", bare, ring.seal(&keyed, plain)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := ring.open(&tc.at, tc.blob); !errors.Is(err, errSealAuth) {
				t.Fatalf("open = %q, %v; want errSealAuth", got, err)
			}
		})
	}
}

// TestRekeyRebinds: rekey's reseal seals a blob of the newest key that
// opens only under its legacy binding again under the key; the result
// opens under the key directly, not under the bare id, and is current.
func TestRekeyRebinds(t *testing.T) {
	ring := testRing(t, 1)
	bare := binding{kind: sealWrite, tenant: "acme", thread: "x", key: "n:0", seq: 2}
	keyed := bare
	keyed.thread = "acme/x"
	r := rekeyer{ring: ring, st: &RekeyStats{}}
	nw, err := r.reseal(&keyed, ring.seal(&bare, []byte("update")))
	if err != nil || nw == nil {
		t.Fatalf("reseal of a legacy blob: %v, %v", nw, err)
	}
	if got, legacy, err := ring.openBound(&keyed, nw); err != nil || legacy || string(got) != "update" {
		t.Fatalf("resealed blob under the key: %q %v %v", got, legacy, err)
	}
	if _, err := ring.open(&bare, nw); !errors.Is(err, errSealAuth) {
		t.Fatalf("resealed blob under the bare id: %v", err)
	}
	if again, err := r.reseal(&keyed, nw); err != nil || again != nil || r.st.Current != 1 {
		t.Fatalf("reseal of a resealed blob: %v, %v, current %d", again, err, r.st.Current)
	}
}
