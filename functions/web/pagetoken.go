package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Page tokens of the API (AIP-158): opaque to the client, bound to the filter that made them.
// A token is the cursor (and its walk's id) sealed with AES-256-GCM under the view's key, with
// a digest of the filter inside: a token read with another filter, or changed by one bit, is
// refused. The key is made when the view starts unless configured (Config.PageTokenKey, the
// same on every replica so that a walk may move between them).

// ErrPageToken is wrapped by every refusal of a page token.
var ErrPageToken = errors.New("invalid pageToken")

// pageSealAD binds a sealed token to its use.
const pageSealAD = "maintsignals api v1 page token"

// cursor is what a page token carries.
type cursor struct {
	// Walk is the snapshot of the walk over the entities ("" none).
	Walk string `json:"w,omitempty"`
	// Key is the last entity key of the page before; Seq the last stream sequence.
	Key string `json:"k,omitempty"`
	Seq uint64 `json:"s,omitempty"`
	// Filter is the digest of the filter the walk began with.
	Filter []byte `json:"f"`
}

// sealer seals and opens page tokens.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: PageTokenKey: 32 bytes, not %d", ErrInvalidConfig, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: PageTokenKey: %w", ErrInvalidConfig, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: PageTokenKey: %w", ErrInvalidConfig, err)
	}
	return &sealer{aead: aead}, nil
}

// filterDigest is the digest of a filter's canonical parts.
func filterDigest(parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return h.Sum(nil)[:16]
}

func (s *sealer) seal(c cursor) string {
	plain, _ := json.Marshal(c)
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(pageSealAD)))
}

// open reads a token and checks that it was made for the filter of digest filter.
func (s *sealer) open(token string, filter []byte) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < s.aead.NonceSize() {
		return c, fmt.Errorf("%w: it was not made by this API", ErrPageToken)
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:n], b[n:], []byte(pageSealAD))
	if err != nil {
		return c, fmt.Errorf("%w: it was not made by this API (or by a replica with another key)", ErrPageToken)
	}
	if err := json.Unmarshal(plain, &c); err != nil {
		return c, fmt.Errorf("%w: %w", ErrPageToken, err)
	}
	if string(c.Filter) != string(filter) {
		return c, fmt.Errorf("%w: it belongs to a walk with another filter; start again without pageToken", ErrPageToken)
	}
	return c, nil
}
