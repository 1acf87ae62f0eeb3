package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/waggle-mq/waggle/store"
)

// v2's transactional id pattern (a Java regular expression) is not served.
func init() { register(kmsg.ListTransactions.Int16(), 0, 1, answerNow(handleListTransactions)) }

// txnStates are the states Kafka's filters name that waggle has; the
// prepare states and Dead never occur (ending a transaction is one entry).
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// handleListTransactions lists the transactional ids, filtered by state,
// producer id and (v1) how long the transaction in progress has run.
func handleListTransactions(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	for _, f := range req.StateFilters {
		if !slices.Contains(txnStates, f) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
	}
	// Each broker lists the transactions it coordinates: those of the raft
	// groups it leads, none on a broker that leads none (admin clients ask
	// every broker and merge the answers).
	var leading []Broker
	for _, b := range c.s.everyGroup() {
		if b.IsLeader() {
			leading = append(leading, b)
		}
	}
	if c.writesNowhere() {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	now := c.s.svc.Now().UnixMilli()
	each := func(st store.TxnState) {
		switch {
		case len(req.StateFilters) > 0 && !slices.Contains(req.StateFilters, string(st.Status)),
			len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, st.ProducerID),
			req.DurationFilterMillis >= 0 && req.Version >= 1 && (st.StartMs == 0 || now-st.StartMs < req.DurationFilterMillis):
			return
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = st.TransactionalID, st.ProducerID, string(st.Status)
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	for _, b := range leading {
		if err := b.EachTxn(each); err != nil {
			resp.ErrorCode = errCode(err)
		}
	}
	return resp, nil
}
