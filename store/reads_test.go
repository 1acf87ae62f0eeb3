package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// Contract tests of the store's read paths: what each lookup and listing
// promises, against a real store written through its own write methods.

// view runs fn in a read transaction and fails the test on an error.
func view(t *testing.T, s *Store, fn func(tx *Tx) error) {
	t.Helper()
	if err := s.View(fn); err != nil {
		t.Fatal(err)
	}
}

// Lookups by name are exact: a name that is a prefix of another, or has
// another as its prefix, finds only itself; ids round-trip to the same
// record; a missing one is ErrNotFound, and so is a deleted one.
func TestQueueLookups(t *testing.T) {
	s := openTest(t)
	queues := []Queue{
		{ID: 10, Name: "a", KafkaPartitions: 1},
		{ID: 11, Name: "ab", KafkaPartitions: 2},
		{ID: 12, Name: "a\x00", KafkaPartitions: 3},
		{ID: 256, Name: "b", KafkaPartitions: 4, RetentionMs: -1},
	}
	write(t, s, func(tx *Tx) error {
		for _, q := range queues {
			if err := tx.PutQueue(q); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		for _, want := range queues {
			got, err := tx.Queue(want.Name)
			if err != nil || got.ID != want.ID || got.Name != want.Name || got.KafkaPartitions != want.KafkaPartitions {
				t.Errorf("Queue(%q) = %+v, %v; want %+v", want.Name, got, err, want)
			}
			got, err = tx.QueueByID(want.ID)
			if err != nil || got.ID != want.ID || got.Name != want.Name || got.RetentionMs != want.RetentionMs {
				t.Errorf("QueueByID(%d) = %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		for _, name := range []string{"", "A", "abc", "b\x00", "\x00a", "c"} {
			if q, err := tx.Queue(name); !errors.Is(err, ErrNotFound) {
				t.Errorf("Queue(%q) = %+v, %v; want ErrNotFound", name, q, err)
			}
		}
		for _, id := range []uint64{0, 1, 9, 13, 255, 1 << 56} {
			if q, err := tx.QueueByID(id); !errors.Is(err, ErrNotFound) {
				t.Errorf("QueueByID(%d) = %+v, %v; want ErrNotFound", id, q, err)
			}
		}
		return nil
	})

	// A deleted queue is gone by name and id at once; the others stay.
	write(t, s, func(tx *Tx) error { return tx.DeleteQueue(queues[0], 100) })
	view(t, s, func(tx *Tx) error {
		if _, err := tx.Queue("a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted queue by name: %v, want ErrNotFound", err)
		}
		if _, err := tx.QueueByID(10); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted queue by id: %v, want ErrNotFound", err)
		}
		if q, err := tx.Queue("ab"); err != nil || q.ID != 11 {
			t.Errorf("Queue(ab) after deleting a: %+v, %v", q, err)
		}
		all, err := tx.Queues()
		if err != nil {
			return err
		}
		var names []string
		for _, q := range all {
			names = append(names, q.Name)
		}
		if want := []string{"a\x00", "ab", "b"}; !slices.Equal(names, want) {
			t.Errorf("Queues() = %q, want %q", names, want)
		}
		return nil
	})
}

// Partition looks a name up in one queue only; PartitionByID returns the
// same record; Partitions lists one queue's partitions in name order.
func TestPartitionLookups(t *testing.T) {
	s := openTest(t)
	parts := []Partition{
		{ID: 20, QueueID: 1, Name: "1", NextOffset: 5, StartOffset: 2},
		{ID: 21, QueueID: 1, Name: "0", NextOffset: 7},
		{ID: 22, QueueID: 1, Name: "10", NextOffset: 9, StartOffset: 9},
		{ID: 23, QueueID: 1, Name: "0\x00"},
		{ID: 24, QueueID: 2, Name: "0", NextOffset: 1},
		{ID: 25, QueueID: 256, Name: "0", NextOffset: 3},
	}
	write(t, s, func(tx *Tx) error {
		for _, p := range parts {
			if err := tx.CreatePartition(p); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		for _, want := range parts {
			if got, err := tx.Partition(want.QueueID, want.Name); err != nil || got != want {
				t.Errorf("Partition(%d, %q) = %+v, %v; want %+v", want.QueueID, want.Name, got, err, want)
			}
			if got, err := tx.PartitionByID(want.ID); err != nil || got != want {
				t.Errorf("PartitionByID(%d) = %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		for _, c := range []struct {
			queue uint64
			name  string
		}{{1, ""}, {1, "2"}, {1, "00"}, {2, "1"}, {3, "0"}, {0, "0"}, {257, "0"}} {
			if p, err := tx.Partition(c.queue, c.name); !errors.Is(err, ErrNotFound) {
				t.Errorf("Partition(%d, %q) = %+v, %v; want ErrNotFound", c.queue, c.name, p, err)
			}
		}
		if p, err := tx.PartitionByID(26); !errors.Is(err, ErrNotFound) {
			t.Errorf("PartitionByID(26) = %+v, %v; want ErrNotFound", p, err)
		}
		for queue, want := range map[uint64][]uint64{1: {21, 23, 20, 22}, 2: {24}, 256: {25}, 3: nil} {
			got, err := tx.Partitions(queue)
			if err != nil {
				return err
			}
			var ids []uint64
			for _, p := range got {
				ids = append(ids, p.ID)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("Partitions(%d) = ids %v, want %v", queue, ids, want)
			}
		}
		return nil
	})

	// PutPartition updates the offsets a lookup by name returns.
	write(t, s, func(tx *Tx) error {
		p := parts[0]
		p.NextOffset, p.StartOffset = 50, 40
		return tx.PutPartition(p)
	})
	view(t, s, func(tx *Tx) error {
		p, err := tx.Partition(1, "1")
		if err != nil || p.NextOffset != 50 || p.StartOffset != 40 || p.ID != 20 {
			t.Errorf("Partition after PutPartition = %+v, %v", p, err)
		}
		return nil
	})
}

// pageAll reads a listing in pages of n through page(after, limit),
// passing the last key of each page as the next one's after, and returns
// the keys in the order seen. It stops at the first short page, and fails
// on a page longer than n or more pages than max.
func pageAll(t *testing.T, n, max int, page func(after string, limit int) ([]string, error)) []string {
	t.Helper()
	var all []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > max {
			t.Fatalf("pages of %d: more than %d pages, after %q (seen %q)", n, max, after, all)
		}
		got, err := page(after, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > n {
			t.Fatalf("pages of %d: a page of %d: %q", n, len(got), got)
		}
		all = append(all, got...)
		if len(got) < n {
			return all
		}
		after = got[len(got)-1]
	}
}

// Every listing that takes an after and a limit returns its items in the
// documented order, at most limit of them, and paging with the last key
// returned visits each item once, with no gap at a page boundary, for
// every page size. Names are chosen so that one is a prefix of the next
// and the next sorts right after it ("a", "a\x00").
func TestPagedListings(t *testing.T) {
	s := openTest(t)
	queueNames := []string{"b", "a", "ab", "a\x00", "zz", "\x00", "ba"}
	partNames := []string{"1", "0", "00", "0\x00", "10", "2"}
	txnIDs := []string{"t2", "t1", "t1\x00", "u", "t", "\u00ff"} // valid UTF-8: the state is JSON
	kvKeys := []string{"user2", "user", "user\x00x", "user1", "user10", "userz", "use", "usr", "a"}
	write(t, s, func(tx *Tx) error {
		for i, name := range queueNames {
			if err := tx.PutQueue(Queue{ID: uint64(100 + i), Name: name}); err != nil {
				return err
			}
		}
		for i, name := range partNames {
			if err := tx.CreatePartition(Partition{ID: uint64(200 + i), QueueID: 7, Name: name}); err != nil {
				return err
			}
		}
		// Partitions of the queues either side, which queue 7's listing leaves out.
		for i, q := range []uint64{6, 8} {
			if err := tx.CreatePartition(Partition{ID: uint64(300 + i), QueueID: q, Name: "0\x00"}); err != nil {
				return err
			}
		}
		for i, id := range txnIDs {
			if err := tx.PutTxn(TxnState{TransactionalID: id, ProducerID: int64(i + 1), Status: TxnEmpty}); err != nil {
				return err
			}
		}
		for i, k := range kvKeys {
			if err := tx.PutKV(KVRow{NS: "app", Key: k, Value: []byte(fmt.Sprint(i)), Version: 1}, nil); err != nil {
				return err
			}
		}
		// Neighbouring namespaces, one with the same key bytes after the
		// namespace ("ap" + "puser" vs "app" + "user").
		for _, r := range []KVRow{{NS: "ap", Key: "puser"}, {NS: "app2", Key: "user3"}, {NS: "apq", Key: "user"}} {
			r.Value, r.Version = []byte("1"), 1
			if err := tx.PutKV(r, nil); err != nil {
				return err
			}
		}
		return nil
	})

	sorted := func(keys []string) []string {
		out := slices.Clone(keys)
		slices.Sort(out)
		return out
	}
	var userKeys []string
	for _, k := range sorted(kvKeys) {
		if len(k) >= 4 && k[:4] == "user" {
			userKeys = append(userKeys, k)
		}
	}
	cases := []struct {
		name string
		want []string
		page func(tx *Tx, after string, limit int) ([]string, error)
	}{
		{"QueuesAfter", sorted(queueNames), func(tx *Tx, after string, limit int) ([]string, error) {
			qs, err := tx.QueuesAfter(after, limit)
			var out []string
			for _, q := range qs {
				out = append(out, q.Name)
			}
			return out, err
		}},
		{"PartitionsAfter", sorted(partNames), func(tx *Tx, after string, limit int) ([]string, error) {
			ps, err := tx.PartitionsAfter(7, after, limit)
			var out []string
			for _, p := range ps {
				if p.QueueID != 7 {
					t.Errorf("PartitionsAfter(7) returned %+v", p)
				}
				out = append(out, p.Name)
			}
			return out, err
		}},
		{"TxnsAfter", sorted(txnIDs), func(tx *Tx, after string, limit int) ([]string, error) {
			sts, err := tx.TxnsAfter(after, limit)
			var out []string
			for _, st := range sts {
				out = append(out, st.TransactionalID)
			}
			return out, err
		}},
		{"KVPrefix all", sorted(kvKeys), func(tx *Tx, after string, limit int) ([]string, error) {
			return kvKeysOf(tx.KVPrefix("app", "", after, limit))
		}},
		{"KVPrefix user", userKeys, func(tx *Tx, after string, limit int) ([]string, error) {
			return kvKeysOf(tx.KVPrefix("app", "user", after, limit))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			view(t, s, func(tx *Tx) error {
				for n := 1; n <= len(c.want)+1; n++ {
					got := pageAll(t, n, len(c.want)+1, func(after string, limit int) ([]string, error) {
						return c.page(tx, after, limit)
					})
					if !slices.Equal(got, c.want) {
						t.Errorf("pages of %d: %q, want %q", n, got, c.want)
					}
				}
				return nil
			})
		})
	}
}

func kvKeysOf(rows []KVRow, err error) ([]string, error) {
	var out []string
	for _, r := range rows {
		out = append(out, r.Key)
	}
	return out, err
}

// KVPrefix returns the rows of one namespace whose key starts with prefix
// and sorts after after: after may lie before the prefix (all of it), be a
// key of it or not, or lie past it (none). A key equal to the prefix is
// returned once: paging after it goes on to the next key.
func TestKVPrefixAfter(t *testing.T) {
	s := openTest(t)
	write(t, s, func(tx *Tx) error {
		for _, r := range []KVRow{
			{NS: "n", Key: "k"}, {NS: "n", Key: "k1"}, {NS: "n", Key: "k3"}, {NS: "n", Key: "j"}, {NS: "n", Key: "l"},
			{NS: "m", Key: "k2"}, {NS: "n\x00", Key: "k2"}, {NS: "n", Key: "k4", ExpiresAtMs: 5},
		} {
			r.Value, r.Version = []byte(`"v"`), 1
			if err := tx.PutKV(r, nil); err != nil {
				return err
			}
		}
		return nil
	})
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"k", "", 10, []string{"k", "k1", "k3", "k4"}},
		{"k", "a", 10, []string{"k", "k1", "k3", "k4"}},
		{"k", "k", 10, []string{"k1", "k3", "k4"}},
		{"k", "k0", 10, []string{"k1", "k3", "k4"}},
		{"k", "k1", 10, []string{"k3", "k4"}},
		{"k", "k2", 10, []string{"k3", "k4"}},
		{"k", "k4", 10, nil},
		{"k", "l", 10, nil},
		{"k", "", 2, []string{"k", "k1"}},
		{"k", "k", 1, []string{"k1"}},
		{"k1", "k", 10, []string{"k1"}},
		{"k1", "k1", 10, nil},
		{"", "", 10, []string{"j", "k", "k1", "k3", "k4", "l"}},
		{"", "k", 10, []string{"k1", "k3", "k4", "l"}},
		{"x", "", 10, nil},
	} {
		view(t, s, func(tx *Tx) error {
			got, err := kvKeysOf(tx.KVPrefix("n", c.prefix, c.after, c.limit))
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("KVPrefix(n, %q, after %q, %d) = %q, %v; want %q", c.prefix, c.after, c.limit, got, err, c.want)
			}
			return nil
		})
	}
	// Expired rows are listed with their expiry, for the caller to judge.
	view(t, s, func(tx *Tx) error {
		rows, err := tx.KVPrefix("n", "k4", "", 10)
		if err != nil || len(rows) != 1 || rows[0].ExpiresAtMs != 5 || rows[0].Live(5) || rows[0].NS != "n" {
			t.Errorf("expired row: %+v, %v", rows, err)
		}
		return nil
	})
}
