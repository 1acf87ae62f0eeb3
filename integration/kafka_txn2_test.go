package integration

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/waggle-mq/waggle/command"
)

// Transaction version 2 (KIP-890 part 2) on a three-node cluster reached
// through a follower: ApiVersions finalizes transaction.version 2, so
// franz-go writes without AddPartitionsToTxn and each EndTxn moves its
// producer to a new epoch; read_committed sees the committed
// transactions only. A client held to EndTxn v4 (version 1) keeps one
// epoch across its transactions, on the same cluster.
func TestKafkaTransactionVersion2(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat9))
	brokers := []string{c.followers()[0].kafkaAddr}
	admin := kafkaClient(t, brokers)
	createTopic(t, admin, "tv2", 2, nil)
	ctx := context.Background()

	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "waggle-test", "1"
	av, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(av.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool { return f.Name == "transaction.version" })
	if i < 0 || av.FinalizedFeatures[i].MaxVersionLevel != 2 {
		t.Fatalf("finalized features %+v: want transaction.version 2", av.FinalizedFeatures)
	}

	epochOf := func(id string) int16 {
		t.Helper()
		described, err := kadm.NewClient(admin).DescribeTransactions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := described[id]
		if !ok || d.Err != nil {
			t.Fatalf("DescribeTransactions %s: %+v", id, described)
		}
		return d.ProducerEpoch
	}
	v2 := txnProducer(t, brokers, "tv2-producer", kgo.DefaultProduceTopic("tv2"))
	v1cap := kversion.Stable()
	v1cap.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v1 := txnProducer(t, brokers, "tv1-producer", kgo.DefaultProduceTopic("tv2"), kgo.MaxVersions(v1cap))
	for _, p := range []struct {
		cl    *kgo.Client
		id    string
		moves int16 // how far the epoch moves per transaction
	}{{v2, "tv2-producer", 1}, {v1, "tv1-producer", 0}} {
		// franz-go opts into version 2 once it has seen the feature,
		// re-initializing its producer id after its first transaction.
		produceTxn(t, p.cl, "tv2", true, p.id+"-c1", p.id+"-c2")
		produceTxn(t, p.cl, "tv2", false, p.id+"-a1")
		first := epochOf(p.id)
		produceTxn(t, p.cl, "tv2", true, p.id+"-c3")
		produceTxn(t, p.cl, "tv2", false, p.id+"-a2")
		if got := epochOf(p.id); got != first+2*p.moves {
			t.Errorf("%s: epoch %d after two more transactions, was %d; want it moved by %d each", p.id, got, first, p.moves)
		}
	}
	got := values(consumeN(t, brokers, "tv2", 6, kgo.FetchIsolationLevel(kgo.ReadCommitted())))
	slices.Sort(got)
	want := []string{"tv1-producer-c1", "tv1-producer-c2", "tv1-producer-c3", "tv2-producer-c1", "tv2-producer-c2", "tv2-producer-c3"}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
}

// franz-go's own transactional ETL (TestTxnEtl: a producer, then
// GroupTransactSession consumers moving records on through transactions
// while members join and leave), against a three-node cluster through a
// follower, at transaction version 2.
func TestFranzGoTransactionSuite(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat9))
	runFranzGoTests(t, c.followers()[0], cmpOrEnv("WAGGLE_TXN_RECORDS", "50000"), "TestTxnEtl")
}
