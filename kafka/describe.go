package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/waggle-mq/waggle/broker"
)

// DescribeGroup describes a Kafka consumer group this node coordinates:
// its state, protocol, generation, members and their partitions. found is
// false when this node holds no such group (only the leader holds any).
func (s *Server) DescribeGroup(name string) (g broker.KafkaGroup, found bool) {
	v, found := s.coords[s.placedIn(name)].describe(name)
	if !found {
		return g, false
	}
	g = broker.KafkaGroup{Type: v.groupType, State: v.state, ProtocolType: v.protocolType, Protocol: v.protocol, Generation: v.generation}
	for _, m := range v.members {
		km := broker.KafkaGroupMember{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		var a kmsg.ConsumerMemberAssignment
		// Only the consumer protocol's assignment has a known layout
		// (Connect's, for one, differs).
		if v.protocolType == "consumer" && len(m.assignment) > 0 && a.ReadFrom(m.assignment) == nil {
			for _, t := range a.Topics {
				km.Assignment = append(km.Assignment, broker.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		g.Members = append(g.Members, km)
	}
	return g, true
}
