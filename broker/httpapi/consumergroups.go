package httpapi

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/waggle-mq/waggle/broker"
)

type groupJSON struct {
	Name    string       `json:"name"`
	Cursors []cursorJSON `json:"cursors"`
	// Kafka is the group's Kafka membership, in a group's own answer
	// when Kafka clients are members.
	Kafka *kafkaGroupJSON `json:"kafka,omitempty"`
}

type kafkaGroupJSON struct {
	Type         string            `json:"type"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocolType"`
	Protocol     string            `json:"protocol"`
	Generation   int32             `json:"generation"`
	Members      []kafkaMemberJSON `json:"members"`
}

type kafkaMemberJSON struct {
	MemberID   string                `json:"memberId"`
	InstanceID string                `json:"instanceId,omitempty"`
	ClientID   string                `json:"clientId"`
	ClientHost string                `json:"clientHost"`
	Assignment []topicPartitionsJSON `json:"assignment"`
}

type topicPartitionsJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func toKafkaGroupJSON(g broker.KafkaGroup) *kafkaGroupJSON {
	out := &kafkaGroupJSON{Type: g.Type, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Generation: g.Generation, Members: []kafkaMemberJSON{}}
	for _, m := range g.Members {
		mj := kafkaMemberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assignment: []topicPartitionsJSON{}}
		for _, tp := range m.Assignment {
			mj.Assignment = append(mj.Assignment, topicPartitionsJSON{Topic: tp.Topic, Partitions: tp.Partitions})
		}
		out.Members = append(out.Members, mj)
	}
	return out
}

type cursorJSON struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	Offset        int64  `json:"offset"` // the next offset the group reads
	HighWatermark int64  `json:"highWatermark"`
	Lag           int64  `json:"lag"`
	// Expired counts messages retention dropped before the group read them.
	Expired int64 `json:"expired"`
	// Positioned is false for a partition the group has not read yet
	// (offset is then its log start); InFlight counts leased messages.
	Positioned bool `json:"positioned"`
	InFlight   int  `json:"inFlight"`
}

func (s *Server) groupJSON(name string) (groupJSON, error) {
	cursors, err := gather(s, func(b groupLister) ([]broker.Cursor, error) { return b.GroupPartitions(name) })
	out := groupJSON{Name: name, Cursors: []cursorJSON{}}
	for _, c := range cursors {
		out.Cursors = append(out.Cursors, cursorJSON{Queue: c.Queue, Partition: c.Partition, Offset: c.Committed, HighWatermark: c.HighWatermark,
			Lag: c.Lag(), Expired: c.Expired, Positioned: c.Positioned, InFlight: c.InFlight})
	}
	return out, err
}

// listGroups answers every consumer group with committed positions.
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	names, err := gather(s, groupLister.OffsetGroups)
	slices.Sort(names)
	names = slices.Compact(names)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := struct {
		Groups []groupJSON `json:"groups"`
	}{Groups: []groupJSON{}}
	for _, n := range names {
		g, err := s.groupJSON(n)
		if err != nil {
			s.writeBrokerError(w, err)
			return
		}
		out.Groups = append(out.Groups, g)
	}
	writeJSON(w, http.StatusOK, out)
}

// getGroup answers one group's cursors and lag per partition, and its
// Kafka membership. It runs on the leader, which holds the membership.
func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	if !s.b(r).LeaderCaughtUp() {
		// A new leader may not have applied commits the old one
		// acknowledged: its answer could show a committed offset
		// going back.
		catchingUp(w, "this node has just become the leader and is still applying the raft log; its committed offsets may be older than acknowledged ones")
		return
	}
	name := r.PathValue("group")
	g, err := s.groupJSON(name)
	if s.kafkaGroups != nil {
		if kg, found := s.kafkaGroups(name); found {
			g.Kafka = toKafkaGroupJSON(kg)
		}
	}
	if err == nil && len(g.Cursors) == 0 && g.Kafka == nil {
		err = fmt.Errorf("consumer group %q has no committed positions and no Kafka members: %w", name, broker.ErrNotFound)
	}
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}
