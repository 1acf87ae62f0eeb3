package raftfsm

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
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

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
// under dir and returns the first damage found. It returns ErrNoData for a
// directory that is missing or holds no waggle data, ErrDataDirInUse when
// another process holds it, and ErrDataDirUnreadable when this process may
// not read or write it: none of the three is damage.
func VerifyDataDir(dir string) error {
	if err := probeDataDir(dir); err != nil {
		return err
	}
	checks := []struct {
		what string
		path string
		fn   func(path string) error
	}{
		{"store", filepath.Join(dir, "state"), store.Verify},
		{"raft log", filepath.Join(dir, "raft", "raft.db"), verifyRaftLog},
		{"snapshots", filepath.Join(dir, "raft"), verifySnapshots},
	}
	for _, c := range checks {
		if _, err := os.Stat(c.path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		err := faultsAsErrors(func() error { return c.fn(c.path) })
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
	// (badger) and on the raft log (bolt); a shared one fails at once then.
	for _, path := range []string{filepath.Join(dir, "state"), filepath.Join(dir, "raft", "raft.db")} {
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

// verifyRaftLog checks the bolt file's pages, then every command entry's
// checksum, in one read transaction.
func verifyRaftLog(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		logs := tx.Bucket([]byte("logs"))
		if logs == nil {
			return nil
		}
		return logs.ForEach(func(k, v []byte) error {
			var l raft.Log
			if err := codec.NewDecoderBytes(v, &codec.MsgpackHandle{}).Decode(&l); err != nil {
				return fmt.Errorf("entry %x: %w", k, err)
			}
			if l.Type != raft.LogCommand {
				return nil
			}
			if _, err := unseal(l.Data); err != nil {
				return fmt.Errorf("entry %d: %w", l.Index, err)
			}
			return nil
		})
	})
}

// verifySnapshots opens the newest snapshot, which checks its CRC.
func verifySnapshots(dir string) error {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
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
		db, err := bolt.Open(filepath.Join(raftDir, "raft.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			conf := tx.Bucket([]byte("conf"))
			if conf == nil {
				return errors.New("no conf bucket")
			}
			term, voteTerm = decodeUint64(conf.Get(keyCurrentTerm)), decodeUint64(conf.Get(keyLastVoteTerm))
			voteCand = append([]byte(nil), conf.Get(keyLastVoteCand)...)
			return nil
		})
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
	logs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(raftDir, "raft.db")})
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

// decodeUint64 reads raft-boltdb's big-endian uint64 (0 when absent).
func decodeUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
