package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.FindCoordinator.Int16(), 0, 5, answerNow(handleFindCoordinator)) }

// Coordinator types.
const (
	coordinatorGroup = 0
	coordinatorTxn   = 1
)

// handleFindCoordinator points every consumer group and every
// transactional id at the leader of the raft group that owns its name.
func handleFindCoordinator(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	brokers, _ := c.brokers()
	coordinator := func(id int32) *kafkaBroker {
		for i := range brokers {
			if brokers[i].id == id {
				return &brokers[i]
			}
		}
		return nil
	}
	fill := func(key string, code *int16, id *int32, host *string, port *int32) {
		// A consumer group or a transactional id is coordinated by the
		// leader of the raft group its name places it in (placement.go).
		keyLeader, _ := c.leaderOf(c.s.topic(key))
		coord := coordinator(keyLeader)
		switch {
		case req.CoordinatorType != coordinatorGroup && req.CoordinatorType != coordinatorTxn:
			*code = kerr.InvalidRequest.Code
		case req.CoordinatorType == coordinatorTxn && c.writesNowhere():
			*code = kerr.TransactionalIDAuthorizationFailed.Code
		case req.CoordinatorType == coordinatorGroup && c.groupDenied(auth.Read, key) != 0:
			*code = kerr.GroupAuthorizationFailed.Code
		case coord == nil:
			*code = kerr.CoordinatorNotAvailable.Code
		default:
			*id, *host, *port = coord.id, coord.host, coord.port
		}
	}
	if req.Version < 4 {
		resp.NodeID = -1
		fill(req.CoordinatorKey, &resp.ErrorCode, &resp.NodeID, &resp.Host, &resp.Port)
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		cd := kmsg.NewFindCoordinatorResponseCoordinator()
		cd.Key, cd.NodeID = key, -1
		fill(key, &cd.ErrorCode, &cd.NodeID, &cd.Host, &cd.Port)
		resp.Coordinators = append(resp.Coordinators, cd)
	}
	return resp, nil
}
