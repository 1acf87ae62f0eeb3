package store

import "testing"

// A digest is only read back as the digest of the applied index it was
// written with. A binary without digests moves the applied index on and
// keeps the record (it restores and snapshots every meta key): then, and
// for a record this binary cannot read, the digest starts again at the
// applied index instead of resuming from a stale one.
func TestDigestRecordHoldsOnlyAtItsIndex(t *testing.T) {
	s := openTest(t)
	meta := func() Meta {
		t.Helper()
		var m Meta
		if err := s.View(func(tx *Tx) (err error) { m, err = tx.Meta(); return err }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	write(t, s, func(tx *Tx) error {
		return tx.PutMeta(Meta{AppliedIndex: 10, NextID: 1, DigestSince: 3, Digest: 0xabc})
	})
	if m := meta(); m.DigestSince != 3 || m.Digest != 0xabc {
		t.Fatalf("read back since %d digest %x, want 3, abc", m.DigestSince, m.Digest)
	}
	// An older binary applies entries 11-20: the meta record moves, the
	// digest record stays.
	write(t, s, func(tx *Tx) error { return tx.set(metaKey(), Meta{AppliedIndex: 20, NextID: 1}.encode()) })
	if m := meta(); m.DigestSince != 20 || m.Digest != 0 {
		t.Fatalf("after entries the digest did not see: since %d digest %x, want it to start again at 20", m.DigestSince, m.Digest)
	}
	// A record of a layout this binary does not know is not an error.
	write(t, s, func(tx *Tx) error { return tx.set(digestKey(), []byte{9, 9, 9}) })
	if m := meta(); m.DigestSince != 20 || m.Digest != 0 {
		t.Fatalf("an unknown record: since %d digest %x, want it to start again at 20", m.DigestSince, m.Digest)
	}
}
