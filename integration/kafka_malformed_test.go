package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame builds a request frame: size, header v1 (or v2 for flexible
// versions), body.
func frame(key, version int16, flexible bool, body []byte) []byte {
	var b bytes.Buffer
	hdr := make([]byte, 10)
	binary.BigEndian.PutUint16(hdr, uint16(key))
	binary.BigEndian.PutUint16(hdr[2:], uint16(version))
	binary.BigEndian.PutUint32(hdr[4:], 42)             // correlation id
	binary.BigEndian.PutUint16(hdr[8:], uint16(0xffff)) // null client id
	if flexible {
		hdr = append(hdr, 0) // no tagged fields
	}
	binary.Write(&b, binary.BigEndian, int32(len(hdr)+len(body)))
	b.Write(hdr)
	b.Write(body)
	return b.Bytes()
}

func requestFrame(req kmsg.Request) []byte {
	return frame(req.Key(), req.GetVersion(), req.IsFlexible(), req.AppendTo(nil))
}

// roundTrip sends raw bytes on a new connection and returns the response
// body after the correlation id, or the error that ended the connection.
func roundTrip(t *testing.T, addr string, raw []byte) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(raw); err != nil {
		return nil, err
	}
	var size int32
	if err := binary.Read(c, binary.BigEndian, &size); err != nil {
		return nil, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	return body[4:], nil
}

func requireClosed(t *testing.T, name string, body []byte, err error) {
	t.Helper()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s: want the connection closed, got answer %x / %v", name, body, err)
	}
}

func validBatch(t *testing.T) []byte {
	t.Helper()
	// A batch as a producer writes it, encoded by kgo's own record code.
	b := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, LastOffsetDelta: 0}
	rec := kmsg.Record{Value: []byte("v")}
	enc := rec.AppendTo(nil)
	rec.Length = int32(len(enc) - 1)
	b.Records = rec.AppendTo(nil)
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32c(raw[21:]))
	return raw
}

func produceRequest(topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func produceCode(t *testing.T, addr string, req *kmsg.ProduceRequest) int16 {
	t.Helper()
	body, err := roundTrip(t, addr, requestFrame(req))
	if err != nil {
		t.Fatalf("produce answered no response: %v", err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestKafkaMalformedFramesAreRefusedAndTheBrokerKeepsServing(t *testing.T) {
	n := startSingle(t)
	addr := n.kafkaAddr
	good := kafkaClient(t, []string{addr}, kgo.DefaultProduceTopic("after"))
	createTopic(t, good, "target", 1, map[string]string{"max.message.bytes": "1000"})
	createTopic(t, good, "after", 1, nil)

	t.Run("frame size over the cap", func(t *testing.T) {
		body, err := roundTrip(t, addr, []byte{0x7f, 0xff, 0xff, 0xff, 0, 0})
		requireClosed(t, "2 GiB frame", body, err)
	})
	t.Run("negative and tiny sizes", func(t *testing.T) {
		for _, size := range [][]byte{{0xff, 0xff, 0xff, 0xff}, {0, 0, 0, 3, 1, 2, 3}} {
			body, err := roundTrip(t, addr, size)
			requireClosed(t, "bad size", body, err)
		}
	})
	t.Run("truncated body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0, 0, 1, 0, 0, 3, 0, 1}) // claims 256 bytes, sends 4
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		rest, err := io.ReadAll(c)
		c.Close()
		if err != nil || len(rest) != 0 {
			t.Fatalf("truncated frame answered %x, %v; want a plain close", rest, err)
		}
	})
	t.Run("unknown API key", func(t *testing.T) {
		body, err := roundTrip(t, addr, frame(999, 0, false, nil))
		requireClosed(t, "key 999", body, err)
	})
	t.Run("unsupported ApiVersions version", func(t *testing.T) {
		body, err := roundTrip(t, addr, frame(18, 99, false, nil))
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrApiVersionsResponse() // answered as v0
		if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 35 || len(resp.ApiKeys) == 0 {
			t.Fatalf("ApiVersions v99: %v, code %d, %d keys; want code 35 and the key list", err, resp.ErrorCode, len(resp.ApiKeys))
		}
	})
	t.Run("unsupported Produce version", func(t *testing.T) {
		body, err := roundTrip(t, addr, frame(0, 1, false, []byte{0, 1, 0, 0, 0, 0, 0, 0}))
		requireClosed(t, "Produce v1", body, err)
	})
	t.Run("huge array count", func(t *testing.T) {
		// Metadata v1 whose topic array claims 2^31-1 entries in 4 bytes.
		body, err := roundTrip(t, addr, frame(3, 1, false, []byte{0x7f, 0xff, 0xff, 0xff}))
		requireClosed(t, "huge array", body, err)
	})
	t.Run("bad CRC", func(t *testing.T) {
		raw := validBatch(t)
		raw[len(raw)-1] ^= 0xff
		if code := produceCode(t, addr, produceRequest("target", raw)); code != 2 {
			t.Fatalf("bad CRC answered %d, want CORRUPT_MESSAGE (2)", code)
		}
	})
	t.Run("truncated batch", func(t *testing.T) {
		raw := validBatch(t)
		if code := produceCode(t, addr, produceRequest("target", raw[:len(raw)-3])); code != 2 {
			t.Fatalf("truncated batch answered %d, want CORRUPT_MESSAGE (2)", code)
		}
	})
	t.Run("over max.message.bytes", func(t *testing.T) {
		big := bytes.Repeat(validBatch(t), 40)
		if code := produceCode(t, addr, produceRequest("target", big)); code != 10 {
			t.Fatalf("oversized records answered %d, want MESSAGE_TOO_LARGE (10)", code)
		}
	})
	t.Run("bad acks", func(t *testing.T) {
		req := produceRequest("target", validBatch(t))
		req.Acks = 2
		if code := produceCode(t, addr, req); code != 21 {
			t.Fatalf("acks=2 answered %d, want INVALID_REQUIRED_ACKS (21)", code)
		}
	})
	t.Run("valid raw batch is stored", func(t *testing.T) {
		if code := produceCode(t, addr, produceRequest("target", validBatch(t))); code != 0 {
			t.Fatalf("valid batch answered %d", code)
		}
	})

	// After all that, a real client is served as before.
	produceSync(t, good, &kgo.Record{Value: []byte("still here")})
	if got := consumeN(t, []string{addr}, "after", 1); string(got[0].Value) != "still here" {
		t.Fatalf("good client read %q", got[0].Value)
	}
	if recs := n.fetchAll("target", "0").Entries[0].Records; len(recs) != 1 {
		t.Fatalf("target holds %d records; only the valid batch should be stored", len(recs))
	}
}
