package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/fault"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

func init() { register(kmsg.Produce.Int16(), 3, 13, handleProduce) }

// handleProduce validates every partition's batches and hands them to raft
// in request order, then returns a reply that waits for the commits. acks 1
// and -1 both mean committed by a raft majority and applied; acks 0 gets no
// answer.
func handleProduce(c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var waits []func()
	names := make([]string, len(req.Topics)) // by topic, for leader hints ("": unknown)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		t := &resp.Topics[i]
		*t = kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		if req.Version >= 13 {
			info, ok, err := c.topicByID(rt.TopicID)
			if err != nil {
				return nil, err
			}
			if !ok {
				t.Partitions = produceErrors(rt.Partitions, kerr.UnknownTopicID.Code)
				continue
			}
			name = info.Name
		}
		names[i] = name
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			code := c.topicDenied(auth.Write, name)
			if code == 0 {
				code = c.checkProduce(req.Acks, name)
			}
			if code != 0 {
				p.ErrorCode, p.BaseOffset = code, -1 // as every other refusal, and Kafka
			}
		}
	}
	joinFailed := c.joinTxn(req, names, resp)
	for i, rt := range req.Topics {
		if names[i] == "" {
			continue
		}
		for j, rp := range rt.Partitions {
			p := &resp.Topics[i].Partitions[j]
			if code := joinFailed[store.TxnPartition{Topic: names[i], Partition: rp.Partition}]; code != 0 {
				p.ErrorCode, p.BaseOffset = code, -1
			}
			if p.ErrorCode != 0 {
				continue
			}
			if wait := c.producePartition(names[i], req.Acks, rp, p); wait != nil {
				waits = append(waits, wait)
			}
		}
	}
	return func() (kmsg.Response, error) {
		for _, wait := range waits {
			wait()
		}
		if req.Acks == 0 {
			return nil, nil
		}
		c.hintProduceLeaders(resp, names)
		return resp, nil
	}, nil
}

// checkProduce applies Kafka's request-level checks, in Kafka's order.
func (c *conn) checkProduce(acks int16, topic string) int16 {
	switch {
	case acks != -1 && acks != 0 && acks != 1:
		return kerr.InvalidRequiredAcks.Code
	case !broker.ValidTopicName(topic), isInternalTopic(topic): // no client writes to an internal topic
		return kerr.InvalidTopicException.Code
	case !c.s.topic(topic).IsLeader():
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// producePartition validates one partition's records and hands them to
// raft. It fills out at once when they are refused, or returns a function
// that waits for the commit and fills out then.
func (c *conn) producePartition(topic string, acks int16, rp kmsg.ProduceRequestTopicPartition, out *kmsg.ProduceResponseTopicPartition) func() {
	fail := func(code int16, msg string) {
		out.ErrorCode, out.BaseOffset = code, -1
		if msg != "" {
			out.ErrorMessage = kmsg.StringPtr(msg)
		}
	}
	maxBytes := broker.DefaultMaxMessageBytes
	topics, err := c.s.topic(topic).Topics([]string{topic})
	if err != nil {
		fail(errCode(err), err.Error())
		return nil
	}
	if len(topics) == 1 {
		maxBytes = broker.ProduceLimit(topics[0])
	}
	if len(rp.Records) > maxBytes {
		fail(kerr.MessageTooLarge.Code, fmt.Sprintf("%d bytes of records, max.message.bytes is %d", len(rp.Records), maxBytes))
		return nil
	}
	batches, err := recordbatch.Split(rp.Records)
	if err != nil {
		fail(errCode(err), err.Error())
		return nil
	}
	if len(topics) == 1 && topics[0].Compacts() {
		// As Kafka's validator: every record of a compacted topic has a key.
		for _, b := range batches {
			keyless := false
			if _, _, _, err := recordbatch.Filter(b.Raw, 4*maxBytes, func(r recordbatch.KeyedRecord) bool {
				keyless = keyless || r.Key == nil
				return true
			}); err != nil {
				fail(kerr.CorruptMessage.Code, err.Error())
				return nil
			}
			if keyless {
				fail(kerr.InvalidRecord.Code, fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, rp.Partition))
				return nil
			}
		}
	}
	appendTime := int64(-1)
	if len(topics) == 1 {
		var code int16
		var msg string
		if appendTime, code, msg = c.holdToTopicConfigs(topics[0], acks, batches); code != 0 {
			fail(code, msg)
			return nil
		}
	}
	var autoCreate int32
	if c.s.cfg.AutoCreateTopics && c.may(auth.Manage, auth.Queue, topic) { // creating takes the right to manage
		autoCreate = c.s.cfg.DefaultPartitions
	}
	wait := c.s.topic(topic).ProduceAsync(topic, rp.Partition, autoCreate, batches)
	return func() {
		res, err := wait()
		if err != nil {
			fail(errCode(err), err.Error())
			return
		}
		if code := outcomeCode(res.Outcome); code != 0 {
			fail(code, "")
			return
		}
		out.BaseOffset = res.BaseOffset
		if fault.Is("produce-offset-off-by-one", 50) {
			out.BaseOffset++
		}
		out.LogStartOffset = res.LogStart
		out.LogAppendTime = appendTime // -1: a CreateTime topic
	}
}

func produceErrors(parts []kmsg.ProduceRequestTopicPartition, code int16) []kmsg.ProduceResponseTopicPartition {
	out := make([]kmsg.ProduceResponseTopicPartition, len(parts))
	for i, rp := range parts {
		out[i] = kmsg.NewProduceResponseTopicPartition()
		out[i].Partition, out[i].ErrorCode, out[i].BaseOffset = rp.Partition, code, -1
	}
	return out
}
