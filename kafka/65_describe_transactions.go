package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeTransactions.Int16(), 0, 0, answerNow(handleDescribeTransactions)) }

// handleDescribeTransactions reports each transactional id's state from
// the replicated coordinator state.
func handleDescribeTransactions(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		tb := c.s.topic(id)
		leader := tb.IsLeader()
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = id, -1, -1, -1
		st, found, err := tb.Txn(id)
		switch {
		case c.writesNowhere():
			ts.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case !leader:
			ts.ErrorCode = kerr.NotCoordinator.Code
		case err != nil:
			ts.ErrorCode = errCode(err)
		case !found:
			ts.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			ts.State, ts.TimeoutMillis = string(st.Status), st.TimeoutMs
			ts.ProducerID, ts.ProducerEpoch = st.ProducerID, st.Epoch
			if st.StartMs > 0 {
				ts.StartTimestamp = st.StartMs
			}
			index := map[string]int{} // a topic's place in ts.Topics
			for _, tp := range st.Partitions {
				i, ok := index[tp.Topic]
				if !ok {
					i = len(ts.Topics)
					index[tp.Topic] = i
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					ts.Topics = append(ts.Topics, t)
				}
				ts.Topics[i].Partitions = append(ts.Topics[i].Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
