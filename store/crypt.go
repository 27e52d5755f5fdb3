package store

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/store/driver"
)

// Encryption at rest. A sealed blob is
//
//	codecSealed (1 byte) | key id (8 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// sealed with associated data that names what the blob is and where it
// belongs (sealAAD): its kind, the tenant, the thread (or run), the
// namespace, the seq and, for pending writes, runs and items, their key.
// A blob copied to another row, thread, tenant or position fails to open.
// The key id is the first 8 bytes of the key's SHA-256.
//
// Format 7 moved each tenant's thread from its bare id "x" to its key
// "tenant/x" (ThreadKey) without resealing anything: its blobs stay
// sealed under the thread "x". A blob of a thread keyed for the tenant
// the binding names that fails to open under the key is therefore tried
// once more under the bare id (binding.legacy); new blobs are sealed under
// the key, and Rekey reseals the migrated ones under it, after which they
// open at once.
const (
	codecSealed  = 2
	keyIDLen     = 8
	nonceLen     = 12
	sealedHeader = 1 + keyIDLen + nonceLen
	gcmTagLen    = 16
	// SealedOverhead is what sealing adds to a blob.
	sealedOverhead = sealedHeader + gcmTagLen
	keyLen         = 32
)

// Environment variables that hold the keys (KeyringFromEnv).
const (
	// EnvEncryptionKeys: comma-separated base64 encodings of 32-byte keys,
	// newest first.
	EnvEncryptionKeys = "CAIRN_ENCRYPTION_KEYS"
	// EnvEncryptionKeysFile: a file holding the same list (commas or new
	// lines between keys).
	EnvEncryptionKeysFile = "CAIRN_ENCRYPTION_KEYS_FILE"
)

var (
	// ErrNoKey: a blob is encrypted with a key the store was not given
	// (opened without keys, or with a keyring that lacks an old key).
	ErrNoKey = errors.New("store: no key for an encrypted blob")
	// ErrBadKey: the keys given are malformed (length, encoding, a
	// repeated key, both environment variables set, an unreadable file).
	ErrBadKey = errors.New("store: bad encryption key")

	errPlaintext = errors.New("not encrypted, but the store is: a plaintext blob is refused")
	errSealAuth  = errors.New("authentication failed: the blob was changed, or moved from another thread, position or tenant")
)

// Keyring holds the AES-256 keys of encryption at rest, newest first: new
// blobs are sealed with the first key; blobs sealed with any of them open.
// A nil *Keyring means no encryption. A Keyring is safe for concurrent use.
type Keyring struct {
	keys   []ringKey
	nonces nonceSource
}

// nonceSource hands out random nonces from crypto/rand, read a few
// kilobytes at a time: a system call per seal would cost more than the
// sealing. Every nonce is fresh random bytes, never handed out twice.
type nonceSource struct {
	mu  sync.Mutex
	buf [4096]byte
	pos int
}

func (n *nonceSource) read(dst []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pos == 0 || n.pos+len(dst) > len(n.buf) {
		// crypto/rand.Read never fails (it crashes the program if the
		// system's generator does).
		_, _ = rand.Read(n.buf[:])
		n.pos = 0
	}
	copy(dst, n.buf[n.pos:])
	clear(n.buf[n.pos : n.pos+len(dst)])
	n.pos += len(dst)
}

type ringKey struct {
	id   [keyIDLen]byte
	aead cipher.AEAD
}

// NewKeyring returns a keyring of 32-byte keys, newest first.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrBadKey)
	}
	k := &Keyring{}
	for i, key := range keys {
		if len(key) != keyLen {
			return nil, fmt.Errorf("%w: key %d of %d is %d bytes, want %d", ErrBadKey, i+1, len(keys), len(key), keyLen)
		}
		sum := sha256.Sum256(key)
		var rk ringKey
		copy(rk.id[:], sum[:keyIDLen])
		for j, prev := range k.keys {
			if prev.id == rk.id {
				return nil, fmt.Errorf("%w: key %d repeats key %d", ErrBadKey, i+1, j+1)
			}
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrBadKey, i+1, err)
		}
		if rk.aead, err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrBadKey, i+1, err)
		}
		k.keys = append(k.keys, rk)
	}
	return k, nil
}

// ParseKeyring reads a list of base64-encoded 32-byte keys separated by
// commas or new lines, newest first (the format of CAIRN_ENCRYPTION_KEYS).
// Errors name the key by position, never its text.
func ParseKeyring(list string) (*Keyring, error) {
	fields := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	var keys [][]byte
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(f)
		if err != nil {
			key, err = base64.RawStdEncoding.DecodeString(f)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: key %d of %d is not base64", ErrBadKey, i+1, len(fields))
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: the list holds no keys", ErrBadKey)
	}
	return NewKeyring(keys...)
}

// KeyringFromEnv returns the keyring CAIRN_ENCRYPTION_KEYS or
// CAIRN_ENCRYPTION_KEYS_FILE give (getenv reads the environment, e.g.
// os.Getenv), or nil when neither is set. Setting both, a malformed key or
// an unreadable file is an error wrapping ErrBadKey that names the
// variable and never contains key material.
func KeyringFromEnv(getenv func(string) string) (*Keyring, error) {
	list, file := getenv(EnvEncryptionKeys), getenv(EnvEncryptionKeysFile)
	switch {
	case list != "" && file != "":
		return nil, fmt.Errorf("%w: both %s and %s are set; set one", ErrBadKey, EnvEncryptionKeys, EnvEncryptionKeysFile)
	case list != "":
		k, err := ParseKeyring(list)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvEncryptionKeys, err)
		}
		return k, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("%w: %s: reading %s: %v", ErrBadKey, EnvEncryptionKeysFile, file, err)
		}
		k, err := ParseKeyring(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", EnvEncryptionKeysFile, file, err)
		}
		return k, nil
	}
	return nil, nil
}

// KeyIDs returns the ids of the keys, newest first: the hex of the first 8
// bytes of each key's SHA-256, as stored in sealed blobs' headers.
func (k *Keyring) KeyIDs() []string {
	if k == nil {
		return nil
	}
	out := make([]string, len(k.keys))
	for i, rk := range k.keys {
		out[i] = hex.EncodeToString(rk.id[:])
	}
	return out
}

// sealKind names what a sealed blob is; it is part of the associated data.
// A checkpoint's metadata is sealed in its patch blob (joinMeta).
type sealKind byte

const (
	sealPatch    sealKind = 'p'
	sealSnapshot sealKind = 's'
	sealWrite    sealKind = 'w'
	sealRun      sealKind = 'r'
	sealEvent    sealKind = 'e'
	sealItem     sealKind = 'i'
)

// binding is where a blob belongs: the associated data it is sealed with.
type binding struct {
	kind           sealKind
	tenant, thread string
	ns, key        string
	seq            int64
}

const aadTag = "cairn-seal-1"

// legacy is the binding a blob of a thread kept under a key was sealed
// with before format 7 gave the thread its key: the same, with the
// thread's bare id. It exists only for a key of the binding's own tenant
// (the migration keyed a thread for the tenant it had).
func (b *binding) legacy() (binding, bool) {
	tenant, id := SplitThreadKey(b.thread)
	if tenant == "" || tenant != b.tenant {
		return binding{}, false
	}
	lb := *b
	lb.thread = id
	return lb, true
}

// aad appends the associated data of a blob with header hdr (codec and
// key id) to dst.
func (b *binding) aad(dst, hdr []byte) []byte {
	dst = append(dst, aadTag...)
	dst = append(dst, hdr...)
	dst = append(dst, byte(b.kind))
	dst = appendString(dst, b.tenant)
	dst = appendString(dst, b.thread)
	dst = appendString(dst, b.ns)
	dst = appendString(dst, b.key)
	return binary.AppendVarint(dst, b.seq)
}

// isSealed reports whether a stored blob is sealed. Plaintext blobs never
// start with codecSealed: encoded blobs start with codecRaw or codecS2,
// JSON with a character.
func isSealed(blob []byte) bool { return driver.Sealed(blob) }

// sealedKeyID returns the hex key id of a sealed blob.
func sealedKeyID(blob []byte) string {
	if len(blob) < 1+keyIDLen {
		return "?"
	}
	return hex.EncodeToString(blob[1 : 1+keyIDLen])
}

// seal encrypts plain with the newest key, bound to b.
func (k *Keyring) seal(b *binding, plain []byte) []byte {
	rk := &k.keys[0]
	out := make([]byte, sealedHeader, sealedHeader+len(plain)+gcmTagLen)
	out[0] = codecSealed
	copy(out[1:], rk.id[:])
	k.nonces.read(out[1+keyIDLen : sealedHeader]) // a random 96-bit nonce
	var buf [128]byte
	aad := b.aad(buf[:0], out[:1+keyIDLen])
	return rk.aead.Seal(out, out[1+keyIDLen:sealedHeader], plain, aad)
}

// open decrypts a sealed blob bound to b, or to b's pre-format 7 binding
// (binding.legacy). A plaintext blob is refused (errPlaintext), a blob of
// an unknown key is ErrNoKey, one that fails authentication errSealAuth.
func (k *Keyring) open(b *binding, blob []byte) ([]byte, error) {
	plain, _, err := k.openBound(b, blob)
	return plain, err
}

// openBound is open that also reports whether the blob opened only under
// b's legacy binding: a blob of a thread format 7 keyed, not resealed
// since.
func (k *Keyring) openBound(b *binding, blob []byte) (plain []byte, legacy bool, err error) {
	if !isSealed(blob) {
		return nil, false, errPlaintext
	}
	if len(blob) < sealedOverhead {
		return nil, false, fmt.Errorf("sealed blob of %d bytes is shorter than its header", len(blob))
	}
	rk := k.key(blob[1 : 1+keyIDLen])
	if rk == nil {
		return nil, false, noKeyError(blob)
	}
	if plain, ok := rk.openAt(b, blob); ok {
		return plain, false, nil
	}
	if lb, ok := b.legacy(); ok {
		if plain, ok := rk.openAt(&lb, blob); ok {
			return plain, true, nil
		}
	}
	return nil, false, errSealAuth
}

// openAt authenticates and decrypts a sealed blob of this key bound to b.
func (rk *ringKey) openAt(b *binding, blob []byte) ([]byte, bool) {
	var buf [128]byte
	aad := b.aad(buf[:0], blob[:1+keyIDLen])
	plain, err := rk.aead.Open(nil, blob[1+keyIDLen:sealedHeader], blob[sealedHeader:], aad)
	return plain, err == nil
}

func (k *Keyring) key(id []byte) *ringKey {
	for i := range k.keys {
		if bytes.Equal(k.keys[i].id[:], id) {
			return &k.keys[i]
		}
	}
	return nil
}

// current reports whether a blob is sealed with the newest key.
func (k *Keyring) current(blob []byte) bool {
	return isSealed(blob) && len(blob) >= 1+keyIDLen && bytes.Equal(blob[1:1+keyIDLen], k.keys[0].id[:])
}

func noKeyError(blob []byte) error {
	return fmt.Errorf("%w: the blob is encrypted with key %s, which is not among the keys given (%s)", ErrNoKey, sealedKeyID(blob), EnvEncryptionKeys)
}

// openBlob opens a blob as a store with keyring k (nil: no encryption)
// reads it: with keys, it must be sealed; without, it must not be.
func (k *Keyring) openBlob(b *binding, blob []byte) ([]byte, error) {
	if k == nil {
		if isSealed(blob) {
			return nil, noKeyError(blob)
		}
		return blob, nil
	}
	return k.open(b, blob)
}
