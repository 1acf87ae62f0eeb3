package fsm

import (
	"bytes"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// memLog is the raft log of an FSM applied without raft: the entries it
// applied, for the refs of log format 5 to be read from.
type memLog struct {
	mu      sync.Mutex
	entries map[uint64][]byte
}

func (m *memLog) EntryData(index uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.entries[index]
	if !ok {
		return nil, store.ErrEntryGone
	}
	return command.Unseal(bytes.Clone(data))
}

func (m *memLog) add(l *raft.Log) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[l.Index] = l.Data
}

// keepLog gives f a raft log of the entries it applies.
func keepLog(f *FSM) *FSM {
	m := &memLog{entries: map[uint64][]byte{}}
	f.tap = m.add
	f.store.SetRaftLog(m)
	return f
}
