package integration

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchSession sends one Fetch v11 (topic names, no tagged fields) of the given partitions,
// each from its offset, in session id at epoch; forget names partitions
// to drop from the session.
func fetchSession(t *testing.T, addr string, id, epoch int32, from map[int32]int64, forget ...int32) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch, req.MaxWaitMillis, req.MaxBytes = 11, id, epoch, 50, 1<<20
	if len(from) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "sess"
		for _, p := range slices.Sorted(mapsKeys(from)) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, from[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = "sess", forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	body, err := roundTrip(t, addr, requestFrame(req))
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

func mapsKeys(m map[int32]int64) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// answered lists the partitions a Fetch answer carries, and which of them
// carry records.
func answered(resp *kmsg.FetchResponse) (parts, withRecords []int32) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, p.Partition)
			if len(p.RecordBatches) > 0 {
				withRecords = append(withRecords, p.Partition)
			}
		}
	}
	return parts, withRecords
}

// Fetch sessions (KIP-227) over the raw protocol: the first fetch names
// every partition and gets a session; an incremental fetch carries only
// partitions with news; a stale epoch, an unknown session and a closed one
// are refused; a forgotten partition is no longer read.
func TestKafkaFetchSessions(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("sess"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "sess", 3, nil)
	produceSync(t, cl, &kgo.Record{Partition: 0, Value: []byte("a")})

	full := fetchSession(t, n.kafkaAddr, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	parts, recs := answered(full)
	if full.ErrorCode != 0 || full.SessionID == 0 || len(parts) != 3 || !slices.Equal(recs, []int32{0}) {
		t.Fatalf("first fetch: error %d session %d partitions %v with records %v", full.ErrorCode, full.SessionID, parts, recs)
	}
	id := full.SessionID

	// The client moves partition 0 past its record: nothing is new.
	if parts, _ := answered(fetchSession(t, n.kafkaAddr, id, 1, map[int32]int64{0: 1})); len(parts) != 0 {
		t.Fatalf("incremental fetch with no news carried partitions %v", parts)
	}
	produceSync(t, cl, &kgo.Record{Partition: 2, Value: []byte("b")})
	if parts, recs := answered(fetchSession(t, n.kafkaAddr, id, 2, nil)); !slices.Equal(parts, []int32{2}) || !slices.Equal(recs, []int32{2}) {
		t.Fatalf("after a record on partition 2 the fetch carried %v (records on %v), want only 2", parts, recs)
	}
	if code := fetchSession(t, n.kafkaAddr, id, 2, nil).ErrorCode; code != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("a stale epoch answered %d, want INVALID_FETCH_SESSION_EPOCH", code)
	}
	if code := fetchSession(t, n.kafkaAddr, id+1, 1, nil).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("an unknown session answered %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}
	// Partition 1 forgotten: a record there is no news for this session.
	produceSync(t, cl, &kgo.Record{Partition: 1, Value: []byte("c")})
	if parts, _ := answered(fetchSession(t, n.kafkaAddr, id, 3, map[int32]int64{2: 1}, 1)); len(parts) != 0 {
		t.Fatalf("after forgetting partition 1 the fetch carried %v", parts)
	}
	// Epoch -1 closes the session.
	if resp := fetchSession(t, n.kafkaAddr, id, -1, map[int32]int64{1: 0}); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("closing fetch: error %d session %d", resp.ErrorCode, resp.SessionID)
	}
	if code := fetchSession(t, n.kafkaAddr, id, 4, nil).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a closed session answered %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}
}
