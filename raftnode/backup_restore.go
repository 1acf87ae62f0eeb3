package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/store"
)

// ErrDataDirNotEmpty refuses a restore into a directory that holds files:
// a restore never overwrites.
var ErrDataDirNotEmpty = errors.New("the data directory exists and is not empty")

// RestoreBackup builds a stopped node's data directory from a backup's
// snapshot stream (body, of a file already verified) so that `waggle
// serve` starts from it as the single voter self:
//
//   - the stream goes into raft's snapshot store as a snapshot at the
//     backup's index and term whose configuration is self alone, split into
//     state.bin and segment files as a snapshot received from a leader is;
//   - raft's current term is set to the backup's term, so the first
//     election moves to a newer term and the log's terms keep growing;
//   - the store is restored from that snapshot, hard-linking its segment
//     files (the data is on disk once), exactly as a start-up that found
//     the store behind its newest snapshot would.
//
// At start raft takes the snapshot's index as applied and appends after
// it; the store's applied index is the backup's, so the FSM applies every
// new entry and skips none. dir must be missing or empty.
func RestoreBackup(dir string, body io.Reader, h fsm.BackupHeader, self Peer) error {
	if err := RequireEmptyDir(dir); err != nil {
		return err
	}
	raftDir := filepath.Join(dir, "raft")
	if err := os.MkdirAll(raftDir, 0o755); err != nil {
		return err
	}
	logger := hclog.NewNullLogger()
	snaps, err := newSnapshotStore(raftDir, 2, logger)
	if err != nil {
		return err
	}
	// Raft wants a snapshot index and term of at least 1; a backup of a
	// store that applied nothing has 0, and the FSM skips nothing above 0.
	index, term := max(h.Index, 1), max(h.Term, 1)
	if err := writeBackupSnapshot(snaps, body, index, term, self); err != nil {
		return err
	}
	logs, err := openLogStore(raftDir, logger)
	if err != nil {
		return fmt.Errorf("create raft log: %w", err)
	}
	if err := errors.Join(logs.SetUint64(keyCurrentTerm, term), logs.Close()); err != nil {
		return fmt.Errorf("set raft term: %w", err)
	}
	return restoreStore(filepath.Join(dir, "state"), snaps, h.Index)
}

// writeBackupSnapshot stores body in snaps as the snapshot at index and term.
func writeBackupSnapshot(snaps *snapshotStore, body io.Reader, index, term uint64, self Peer) error {
	// The file store encodes the voters through a transport's EncodePeer
	// (for version 0 readers); an in-memory one encodes the address as is.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(self.Addr))
	defer trans.Close()
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(self.ID), Address: raft.ServerAddress(self.Addr)}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, conf, index, trans)
	if err != nil {
		return fmt.Errorf("create snapshot: %w", err)
	}
	if _, err := io.Copy(sink, body); err != nil {
		sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// restoreStore creates the store in dir from the newest snapshot in snaps
// and checks that it applied index.
func restoreStore(dir string, snaps *snapshotStore, index uint64) error {
	list, err := snaps.List()
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return errors.New("restore: the snapshot just written is not listed")
	}
	st, err := store.Open(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	sm, err := fsm.NewFSM(st)
	if err != nil {
		return err
	}
	sm.LinkSnapshotFiles(snaps.openedFiles)
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", list[0].ID, err)
	}
	if err := sm.Restore(rc); err != nil {
		return fmt.Errorf("restore store: %w", err)
	}
	if got := sm.AppliedIndex(); got != index {
		return fmt.Errorf("restored store applied index %d, the backup says %d", got, index)
	}
	return nil
}

// RequireEmptyDir fails with ErrDataDirNotEmpty when dir holds anything
// (a missing dir is fine): a restore never overwrites.
func RequireEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s holds %d entries (restore into a new directory)", ErrDataDirNotEmpty, dir, len(entries))
	}
	return nil
}
