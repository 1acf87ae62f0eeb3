package dedup

import "testing"

func TestCheckSequence(t *testing.T) {
	const now = 1_000_000
	st := ProducerState{Epoch: 3, LastUpdateMs: now - 10, Batches: []ProducerBatch{
		{FirstSeq: 0, LastSeq: 9, BaseOffset: 100},
		{FirstSeq: 10, LastSeq: 14, BaseOffset: 110},
	}}
	tests := []struct {
		name          string
		state         ProducerState
		found         bool
		epoch         int16
		first, last   int32
		nowMs         int64
		want          SequenceVerdict
		wantDupOffset int64
	}{
		{"no state accepts any sequence", ProducerState{}, false, 0, 57, 60, now, AppendBatch, 0},
		{"next in order", st, true, 3, 15, 20, now, AppendBatch, 0},
		{"exact resend of the last", st, true, 3, 10, 14, now, DuplicateBatch, 110},
		{"exact resend of an older one", st, true, 3, 0, 9, now, DuplicateBatch, 100},
		{"gap", st, true, 3, 16, 20, now, OutOfOrder, 0},
		{"overlapping but not exact", st, true, 3, 12, 14, now, OutOfOrder, 0},
		{"stale epoch", st, true, 2, 15, 20, now, StaleEpoch, 0},
		{"new epoch from zero", st, true, 4, 0, 3, now, AppendBatch, 0},
		{"new epoch not from zero", st, true, 4, 15, 20, now, OutOfOrder, 0},
		{"expired state counts as none", st, true, 3, 99, 99, now + ProducerExpirationMs, AppendBatch, 0},
		{"wrap after the largest sequence", ProducerState{Epoch: 0, LastUpdateMs: now, Batches: []ProducerBatch{{FirstSeq: 1<<31 - 5, LastSeq: 1<<31 - 1}}}, true, 0, 0, 4, now, AppendBatch, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dup := CheckSequence(tt.state, tt.found, tt.epoch, tt.first, tt.last, tt.nowMs)
			if got != tt.want || (got == DuplicateBatch && dup.BaseOffset != tt.wantDupOffset) {
				t.Fatalf("verdict %d (dup offset %d), want %d (%d)", got, dup.BaseOffset, tt.want, tt.wantDupOffset)
			}
		})
	}
}

func TestRecordKeepsTheLastFiveBatchesOfAnEpoch(t *testing.T) {
	var st ProducerState
	for i := int32(0); i < 7; i++ {
		st = st.Record(0, ProducerBatch{FirstSeq: i * 10, LastSeq: i*10 + 9, BaseOffset: int64(i) * 10}, int64(i))
	}
	if len(st.Batches) != MaxProducerBatches || st.Batches[0].FirstSeq != 20 || st.LastUpdateMs != 6 {
		t.Fatalf("state %+v: want the last 5 batches", st)
	}
	st = st.Record(1, ProducerBatch{FirstSeq: 0, LastSeq: 0, BaseOffset: 70}, 7)
	if st.Epoch != 1 || len(st.Batches) != 1 {
		t.Fatalf("a new epoch kept old batches: %+v", st)
	}
}
