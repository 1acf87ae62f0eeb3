package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// A node checks its data directory before it starts. Damage anywhere (a
// badger table that fails its checksums, a raft log whose pages or command
// entries do not check out, a snapshot that fails its CRC, a file cut
// short) makes it move the whole directory aside and start over empty,
// taking the state from its peers: the leader sends it a snapshot or its
// whole log.
//
// Raft's safety rests on a voter keeping what it acknowledged. A node that
// threw its log away must not help elect a leader that lacks entries it
// once acknowledged, so it keeps its term and vote, moves to the next term
// (which makes the current leader step down and the others elect a leader
// of a newer term), and grants no vote until its log holds an entry of a
// term newer than the one it had: by the log matching property it then
// holds every entry it may have acknowledged before.

// Keys in raft's stable store (raft-boltdb's "conf" bucket).
var (
	keyCurrentTerm  = []byte("CurrentTerm")  // raft's own
	keyLastVoteTerm = []byte("LastVoteTerm") // raft's own
	keyLastVoteCand = []byte("LastVoteCand") // raft's own
	// keyNoVoteThroughTerm is waggle's: while set, this node grants no vote
	// until its log's last term is above it.
	keyNoVoteThroughTerm = []byte("WaggleNoVoteThroughTerm")
	// keyNewDirectory is waggle's: 1 from the first start of a node of a
	// static cluster on a new data directory until its vote guard lifts
	// (see amnesia.go).
	keyNewDirectory = []byte("WaggleNewDirectory")
)

// ErrDataDirInUse reports a data directory whose files another process
// holds locked: that is no damage, and no reason to repair.
var ErrDataDirInUse = errors.New("the data directory is in use by another process")

// ErrDataDirUnreadable reports a data directory, or a file in it, this
// process may not read or write (another owner, missing permission bits, a
// read-only mount): no damage either, and nothing to repair; the operator
// fixes the permissions.
var ErrDataDirUnreadable = errors.New("cannot read or write the data directory (check its owner and permissions)")

// ErrNoData reports a data directory that does not exist or holds no
// waggle data (neither state/ nor raft/): nothing to verify. A new node
// starts from such a directory; a backup check must not pass on one.
var ErrNoData = errors.New("no waggle data")

// VerifyDataDir checks a stopped node's store, raft log and newest snapshot
// under dir, every byte of them, and returns the first damage found. It
// returns ErrNoData for a directory that is missing or holds no waggle
// data, ErrDataDirInUse when another process holds it, and
// ErrDataDirUnreadable when this process may not read or write it: none of
// the three is damage.
func VerifyDataDir(dir string) error { return verifyDataDir(dir, true) }

// VerifyDataDirAtStart is the check a node runs on itself before it
// starts: VerifyDataDir without reading the data. The store's tables are
// checked (metadata and indexes only: message data lives in segment files,
// whose records are checked when read), the raft log's entries past the
// store's applied index (those a restart applies again) and at least its
// newest startCheckEntries, and the newest snapshot's files against their
// recorded sizes.
func VerifyDataDirAtStart(dir string) error { return verifyDataDir(dir, false) }

// The start-up check reads at least the raft log's newest startCheckEntries
// entries or startCheckBytes of them, whichever is less, beside those past
// the store's applied index.
const (
	startCheckEntries = 4096
	startCheckBytes   = 64 << 20
)

func verifyDataDir(dir string, full bool) error {
	if err := probeDataDir(dir); err != nil {
		return err
	}
	var applied uint64 // the store's, once checked: a restart re-applies the log past it
	checks := []struct {
		what string
		path string
		fn   func(path string, full bool) error
	}{
		{"store", filepath.Join(dir, "state"), func(path string, full bool) (err error) {
			applied, err = store.VerifyApplied(path, full)
			return err
		}},
		{"raft log", filepath.Join(dir, "raft"), func(path string, full bool) error { return verifyRaftLog(path, full, applied) }},
		{"snapshots", filepath.Join(dir, "raft"), verifySnapshots},
	}
	for _, c := range checks {
		if _, err := os.Stat(c.path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		err := faultsAsErrors(func() error { return c.fn(c.path, full) })
		if kind := notDamage(err); kind != nil {
			return fmt.Errorf("%w: %s at %s: %v", kind, c.what, c.path, err)
		}
		if err != nil {
			return fmt.Errorf("%s at %s: %w", c.what, c.path, err)
		}
	}
	return nil
}

// probeDataDir looks at dir with plain system calls before badger and bolt
// open it, because badger flattens the errors it meets into text (y.Wrapf
// formats them with %+v), so a lock held by a running node or a file of
// another owner would reach the caller looking like damage. It returns
// ErrNoData, ErrDataDirUnreadable or ErrDataDirInUse, wrapped, or nil.
func probeDataDir(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", ErrNoData, dir)
	} else if err != nil {
		return fmt.Errorf("%w: %v", ErrDataDirUnreadable, err)
	}
	found := false
	for _, sub := range []string{"state", "raft"} {
		root := filepath.Join(dir, sub)
		if _, err := os.Lstat(root); errors.Is(err, os.ErrNotExist) {
			continue
		}
		found = true
		// Every file and folder must be readable and writable (badger and
		// bolt open them read-write); folders also searchable.
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			mode := uint32(unix.R_OK | unix.W_OK)
			if d.IsDir() {
				mode |= unix.X_OK
			}
			if err := unix.Access(path, mode); err != nil {
				return &os.PathError{Op: "access", Path: path, Err: err}
			}
			return nil
		})
		if err != nil {
			if kind := notDamage(err); kind != nil {
				return fmt.Errorf("%w: %v", kind, err)
			}
			return fmt.Errorf("%s: %w", root, err)
		}
	}
	if !found {
		return fmt.Errorf("%w: %s holds neither state/ nor raft/", ErrNoData, dir)
	}
	// A running node holds an exclusive flock on the store's folder
	// (badger) and on the raft log's meta file (bolt; raft.db before the
	// WAL); a shared one fails at once then.
	for _, path := range []string{filepath.Join(dir, "state"), filepath.Join(dir, "raft", walDir, walMetaFile), filepath.Join(dir, "raft", legacyLogDB)} {
		if err := probeLock(path); err != nil {
			if kind := notDamage(err); kind != nil {
				return fmt.Errorf("%w: %v", kind, err)
			}
			return err
		}
	}
	return nil
}

// probeLock takes and drops a shared, non-blocking flock on path (missing
// is fine).
func probeLock(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// notDamage classifies an error met while checking a data directory:
// ErrDataDirInUse for a lock another process holds, ErrDataDirUnreadable
// for a permission refusal or a read-only file system, nil for anything
// else (which the caller counts as damage). Badger's own errors arrive as
// text (see probeDataDir), so its lock and permission messages are matched
// too.
func notDamage(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case errors.Is(err, bolt.ErrTimeout), errors.Is(err, unix.EWOULDBLOCK),
		strings.Contains(msg, "Another process is using this Badger database"):
		return ErrDataDirInUse
	case errors.Is(err, os.ErrPermission), errors.Is(err, unix.EROFS),
		strings.Contains(msg, unix.EACCES.Error()), strings.Contains(msg, unix.EPERM.Error()),
		strings.Contains(msg, unix.EROFS.Error()):
		return ErrDataDirUnreadable
	}
	return nil
}

// faultsAsErrors runs fn on its own goroutine, turning a panic, or a
// memory fault in a memory-mapped file cut short, into an error.
func faultsAsErrors(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("damaged: %v", r)
			}
		}()
		done <- fn()
	}()
	return <-done
}

// verifyRaftLog checks the raft log under raftDir: the meta file's pages,
// then each entry's checksum: every entry, or (at start) those past the
// store's applied index, which a restart applies again, and at least the
// newest startCheckEntries. A log raft-boltdb kept, not yet moved to the
// WAL, is checked as such.
func verifyRaftLog(raftDir string, full bool, applied uint64) error {
	if _, err := os.Stat(filepath.Join(raftDir, legacyLogDB)); err == nil {
		return verifyBoltLog(filepath.Join(raftDir, legacyLogDB))
	}
	dir := filepath.Join(raftDir, walDir)
	if _, err := os.Stat(filepath.Join(dir, walMetaFile)); errors.Is(err, os.ErrNotExist) {
		return nil // created, never written
	}
	if err := checkBoltPages(filepath.Join(dir, walMetaFile)); err != nil {
		return err
	}
	logs, err := openWAL(dir, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	defer logs.Close()
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	// Newest first: at start, stop below the applied index once the newest
	// startCheckEntries or startCheckBytes are read.
	var l raft.Log
	read := 0
	for i, n := last, 0; i >= first; i, n = i-1, n+1 {
		if !full && i <= applied && (n >= startCheckEntries || read >= startCheckBytes) {
			break
		}
		if err := logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if err := checkEntry(&l); err != nil {
			return err
		}
		read += len(l.Data)
	}
	return nil
}

// checkEntry verifies a command entry's own checksum.
func checkEntry(l *raft.Log) error {
	if l.Type != raft.LogCommand {
		return nil
	}
	if _, err := command.Unseal(l.Data); err != nil {
		return fmt.Errorf("entry %d: %w", l.Index, err)
	}
	return nil
}

// checkBoltPages checks a bolt file's page structure.
func checkBoltPages(path string) error {
	return viewCheckedBolt(path, func(*bolt.Tx) error { return nil })
}

// verifyBoltLog checks a raft-boltdb file's pages, then every command
// entry's checksum, in one read transaction.
func verifyBoltLog(path string) error {
	return viewCheckedBolt(path, func(tx *bolt.Tx) error {
		logs := tx.Bucket([]byte("logs"))
		if logs == nil {
			return nil
		}
		return logs.ForEach(func(k, v []byte) error {
			var l raft.Log
			if err := codec.NewDecoderBytes(v, &codec.MsgpackHandle{}).Decode(&l); err != nil {
				return fmt.Errorf("entry %x: %w", k, err)
			}
			return checkEntry(&l)
		})
	})
}

// viewCheckedBolt opens a bolt file read-only, checks its pages, and runs
// fn in the same read transaction.
func viewCheckedBolt(path string, fn func(*bolt.Tx) error) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return fn(tx)
	})
}

// verifySnapshots checks the newest snapshot: every byte against raft's
// CRC (full), or its files against their recorded sizes.
func verifySnapshots(dir string, full bool) error {
	snaps, err := newSnapshotStore(dir, 2, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	if !full {
		return snaps.checkSizes(list[0].ID)
	}
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", list[0].ID, err)
	}
	return rc.Close()
}

// PrepareRepair moves a damaged node's state and raft directories into
// dir/damaged-<time> and leaves a raft log holding only its term and vote,
// one term on, with its vote withheld (see above). It returns the folder
// the damaged files went to. Without a readable term and vote the node
// cannot safely come back as itself; the error says what to do instead.
func PrepareRepair(dir string) (string, error) {
	raftDir := filepath.Join(dir, "raft")
	var term, voteTerm uint64
	var voteCand []byte
	err := faultsAsErrors(func() error {
		var err error
		term, voteTerm, voteCand, err = readTermAndVote(raftDir)
		return err
	})
	if kind := notDamage(err); kind != nil {
		// Not the damage the caller found: a lock or a permission, which
		// emptying the directory would not cure.
		return "", fmt.Errorf("%w: raft log in %s: %v", kind, raftDir, err)
	}
	if err != nil || term == 0 {
		return "", fmt.Errorf("the raft term and vote in %s cannot be read (%v): this node cannot rejoin as itself; "+
			"remove it (waggle cluster remove), empty its data directory and add it back as a new node with --join", raftDir, err)
	}
	aside := filepath.Join(dir, fmt.Sprintf("damaged-%d", time.Now().Unix()))
	if err := os.MkdirAll(aside, 0o755); err != nil {
		return "", err
	}
	for _, sub := range []string{"state", "raft"} {
		if err := os.Rename(filepath.Join(dir, sub), filepath.Join(aside, sub)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	if err := os.MkdirAll(raftDir, 0o755); err != nil {
		return "", err
	}
	logs, err := openWAL(filepath.Join(raftDir, walDir), hclog.NewNullLogger())
	if err != nil {
		return "", err
	}
	defer logs.Close()
	return aside, errors.Join(
		logs.SetUint64(keyCurrentTerm, term+1),
		logs.SetUint64(keyLastVoteTerm, voteTerm),
		logs.Set(keyLastVoteCand, voteCand),
		logs.SetUint64(keyNoVoteThroughTerm, term),
	)
}

// readTermAndVote reads raft's term and vote straight from the stable
// store's bolt file (the WAL's meta file, or raft-boltdb's file before the
// WAL), without opening the log itself, which may be what is damaged.
func readTermAndVote(raftDir string) (term, voteTerm uint64, voteCand []byte, err error) {
	path, bucket, decode := filepath.Join(raftDir, walDir, walMetaFile), metadb.StableBucket, decodeUint64LE
	if _, err := os.Stat(filepath.Join(raftDir, legacyLogDB)); err == nil {
		path, bucket, decode = filepath.Join(raftDir, legacyLogDB), "conf", decodeUint64
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, 0, nil, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("no %s bucket", bucket)
		}
		term, voteTerm = decode(b.Get(keyCurrentTerm)), decode(b.Get(keyLastVoteTerm))
		voteCand = append([]byte(nil), b.Get(keyLastVoteCand)...)
		return nil
	})
	return term, voteTerm, voteCand, err
}

// decodeUint64LE reads raft-wal's little-endian uint64 (0 when absent).
func decodeUint64LE(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// decodeUint64 reads raft-boltdb's big-endian uint64 (0 when absent).
func decodeUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
