package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sessionFetch(id, epoch int32, partitions int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 12, id, epoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	for p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// The session cache stays bounded: past maxFetchSessions the least
// recently used session goes, a session past the partition bound is not
// kept, and an evicted session's client is told to start over.
func TestFetchSessionCacheIsBounded(t *testing.T) {
	fs := newFetchSessions()
	now := time.Unix(0, 0)
	var first int32
	for i := range maxFetchSessions + 1 {
		s, _, code := fs.resolve(sessionFetch(0, 0, 1), now.Add(time.Duration(i)*time.Second))
		if s == nil || code != 0 {
			t.Fatalf("session %d not created (code %d)", i, code)
		}
		if i == 0 {
			first = s.id
		}
	}
	if len(fs.byID) != maxFetchSessions || fs.partitions != maxFetchSessions {
		t.Fatalf("%d sessions with %d partitions, want %d of each", len(fs.byID), fs.partitions, maxFetchSessions)
	}
	if _, _, code := fs.resolve(sessionFetch(first, 1, 0), now); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the evicted oldest session answered %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}
	if s, read, _ := fs.resolve(sessionFetch(0, 0, maxSessionPartitions), now); s != nil || len(read.Topics[0].Partitions) != maxSessionPartitions {
		t.Fatal("a session past the partition bound was kept, or its fetch not answered in full")
	}
}

// An incremental fetch reads the session's whole partition list with the
// request's updates, and the epoch moves on.
func TestFetchSessionMergesUpdates(t *testing.T) {
	fs := newFetchSessions()
	s, _, _ := fs.resolve(sessionFetch(0, 0, 3), time.Unix(0, 0))
	upd := sessionFetch(s.id, 1, 0)
	upd.Topics[0].Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 1, FetchOffset: 42}}
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "t", []int32{2}
	upd.ForgottenTopics = append(upd.ForgottenTopics, ft)
	_, read, code := fs.resolve(upd, time.Unix(1, 0))
	if code != 0 || len(read.Topics) != 1 {
		t.Fatalf("incremental fetch: code %d, read %+v", code, read)
	}
	got := read.Topics[0].Partitions
	if len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 1 || got[1].FetchOffset != 42 {
		t.Fatalf("read %+v, want partitions 0 and 1 (at 42)", got)
	}
	if s.epoch != 2 {
		t.Fatalf("next epoch %d, want 2", s.epoch)
	}
}

// A session's partitions added over several fetches, topics interleaved,
// are read as one entry per topic.
func TestFetchSessionGroupsPartitionsByTopic(t *testing.T) {
	fs := newFetchSessions()
	s, _, _ := fs.resolve(sessionFetch(0, 0, 2), time.Unix(0, 0)) // t: 0, 1
	upd := sessionFetch(s.id, 1, 0)
	upd.Topics = nil
	for _, add := range []struct {
		topic     string
		partition int32
	}{{"u", 0}, {"t", 2}} {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = add.topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = add.partition
		rt.Partitions = append(rt.Partitions, rp)
		upd.Topics = append(upd.Topics, rt)
	}
	_, read, code := fs.resolve(upd, time.Unix(1, 0))
	if code != 0 || len(read.Topics) != 2 || read.Topics[0].Topic != "t" || len(read.Topics[0].Partitions) != 3 ||
		read.Topics[1].Topic != "u" || len(read.Topics[1].Partitions) != 1 {
		t.Fatalf("read %+v: want t with 3 partitions, then u with 1", read.Topics)
	}
}
