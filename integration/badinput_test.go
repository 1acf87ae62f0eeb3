package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// More hostile input on both listeners: each is refused (or answered) and
// a good client is served afterwards, with the broker's memory bounded.
func TestHostileInputKeepsTheBrokerServing(t *testing.T) {
	n := startSingle(t)
	addr := n.kafkaAddr

	t.Run("slow-drip frame is answered", func(t *testing.T) {
		req := kmsg.NewPtrApiVersionsRequest()
		frame := requestFrame(req)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, b := range frame {
			c.Write([]byte{b})
			time.Sleep(20 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4)
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("a frame sent one byte at a time was not answered: %v", err)
		}
	})
	t.Run("garbage after a valid request", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 1
		body := append(req.AppendTo(nil), []byte("trailing garbage")...)
		_, err := roundTrip(t, addr, frame(req.Key(), req.Version, false, body))
		_ = err // answered or closed: both are fine; what matters is below
	})
	t.Run("negative array count", func(t *testing.T) {
		body, err := roundTrip(t, addr, frame(3, 1, false, []byte{0xff, 0xff, 0xff, 0xfe}))
		_ = body
		_ = err
	})
	t.Run("wrong magic", func(t *testing.T) {
		createTopic(t, kafkaClient(t, []string{addr}), "hostile", 1, nil)
		raw := validBatch(t)
		raw[16] = 1
		if code := produceCode(t, addr, produceRequest("hostile", raw)); code != 2 {
			t.Fatalf("magic 1 answered %d, want CORRUPT_MESSAGE (2)", code)
		}
	})
	t.Run("control batch from a client", func(t *testing.T) {
		raw := validBatch(t)
		raw[22] |= 0x20
		rewriteCRC(raw)
		if code := produceCode(t, addr, produceRequest("hostile", raw)); code != 87 {
			t.Fatalf("control batch answered %d, want INVALID_RECORD (87)", code)
		}
	})
	t.Run("2,000 idle connections", func(t *testing.T) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := 0; i < 1000; i++ {
			for _, a := range []string{addr, n.httpAddr} {
				c, err := net.Dial("tcp", a)
				if err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				conns = append(conns, c)
			}
		}
		if rss := rssMiB(t, n); rss > 512 {
			t.Fatalf("resident memory %d MiB with 2,000 idle connections", rss)
		}
		if status := getJSON(t, n.url("/health"), nil); status != http.StatusOK {
			t.Fatalf("health with 2,000 idle connections: %d", status)
		}
	})
	// Regression: a body with invalid UTF-8 was accepted, its bytes turned
	// into U+FFFD by encoding/json, so distinct transactionIds could collide.
	t.Run("HTTP: deep nesting, huge numbers, invalid UTF-8", func(t *testing.T) {
		deep := `{"items":[{"queue":"q","payload":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}]}`
		for name, body := range map[string]string{
			"deep nesting":   deep,
			"huge number":    `{"entries":[{"queue":"q","offset":1e30}]}`,
			"invalid UTF-8":  "{\"items\":[{\"queue\":\"q\",\"partition\":\"\xff\xfe\",\"payload\":1}]}",
			"negative batch": `{"items":[{"queue":"q","payload":1}],"extra":-1}`,
		} {
			path := "/api/v1/push"
			if name == "huge number" {
				path = "/api/v1/fetch"
			}
			var e errorAnswer
			if status := do(t, http.MethodPost, n.url(path), []byte(body), &e); status < 400 || status >= 500 || e.Code == "" {
				t.Errorf("%s: status %d %+v", name, status, e)
			}
		}
		if status, _ := n.pop(t, "q", map[string]string{"batch": "-5"}); status != http.StatusBadRequest {
			t.Errorf("pop with batch=-5: %d", status)
		}
		if status, _ := n.pop(t, "q", map[string]string{"batch": "100000"}); status != http.StatusBadRequest {
			t.Errorf("pop with batch=100000: %d", status)
		}
	})

	// A good client is served after all of it.
	cl := kafkaClient(t, []string{addr}, kgo.DefaultProduceTopic("after-hostile"), kgo.AllowAutoTopicCreation())
	produceSync(t, cl, &kgo.Record{Value: []byte("ok")})
	if got := consumeN(t, []string{addr}, "after-hostile", 1); string(got[0].Value) != "ok" {
		t.Fatalf("good client read %q", got[0].Value)
	}
	requireStatus(t, n.push(pushItem{Queue: "after", TransactionID: "x", Payload: 1})[0], "queued", 0)
}

func rewriteCRC(raw []byte) {
	crc := crc32c(raw[21:])
	raw[17], raw[18], raw[19], raw[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
}

// rssMiB reads the node process's resident memory.
func rssMiB(t *testing.T, n *node) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
