package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// keyedPost sends body to url with an Idempotency-Key and returns the
// status and the raw answer.
func keyedPost(t testing.TB, url, key string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// A write sent again under its Idempotency-Key gets the first answer and
// is not applied again, with the leader killed between the two: a once
// answers won to its winner both times, an incr counts once. The key sent
// with another body is refused.
func TestIdempotencyKeyAnswersTheFirstOutcomeAcrossALeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.leader()
	waitLogFormat(t, leader, 2) // keyed writes are format 2 entries
	once := map[string]any{"ns": "steps", "key": "welcome-42", "forever": true}
	incr := map[string]any{"operations": []map[string]any{{"op": "incr", "ns": "counts", "key": "hits", "forever": true}}}

	status, firstOnce := keyedPost(t, leader.url("/api/v1/kv/once"), "once-1", once)
	if status != http.StatusOK || !bytes.Contains(firstOnce, []byte(`"won":true`)) {
		t.Fatalf("once: %d %s", status, firstOnce)
	}
	status, firstIncr := keyedPost(t, leader.url("/api/v1/kv"), "incr-1", incr)
	if status != http.StatusOK {
		t.Fatalf("incr: %d %s", status, firstIncr)
	}
	// Without a key the same once now loses: the key is what lets a retry
	// learn it won.
	if _, won := leader.once(t, "steps", "welcome-42", 0); won {
		t.Fatal("a second once without a key won")
	}

	leader.kill9()
	var survivor *node
	waitFor(t, 30*time.Second, func() (err error) {
		survivor, err = c.findLeader()
		return err
	})
	for _, n := range c.live() { // through a follower too: it forwards the key
		waitFor(t, 20*time.Second, func() error {
			status, again := keyedPost(t, n.url("/api/v1/kv/once"), "once-1", once)
			if status != http.StatusOK {
				return fmt.Errorf("node %d: retried once answered %d %s", n.id, status, again)
			}
			if !bytes.Equal(again, firstOnce) {
				t.Fatalf("node %d: retried once answered %s, the first %s", n.id, again, firstOnce)
			}
			return nil
		})
		if status, again := keyedPost(t, n.url("/api/v1/kv"), "incr-1", incr); status != http.StatusOK || !bytes.Equal(again, firstIncr) {
			t.Fatalf("node %d: retried incr answered %d %s, the first %s", n.id, status, again, firstIncr)
		}
	}
	var got struct{ Value json.RawMessage }
	if getJSON(t, survivor.url("/api/v1/kv/counts/hits"), &got); string(got.Value) != "1" {
		t.Fatalf("the counter after an incr retried under its key on every node: %s, want 1", got.Value)
	}

	// The key with another request is refused, and nothing is applied.
	other := map[string]any{"ns": "steps", "key": "welcome-43", "forever": true}
	status, refused := keyedPost(t, survivor.url("/api/v1/kv/once"), "once-1", other)
	if status != http.StatusUnprocessableEntity || !bytes.Contains(refused, []byte(`"idempotency_key_reused"`)) {
		t.Fatalf("a key reused with another body: %d %s", status, refused)
	}
	if _, won := survivor.once(t, "steps", "welcome-43", 0); !won {
		t.Fatal("the refused request claimed its marker anyway")
	}
}

// A keyed push sent again answers the same message ids, offsets and
// minted transaction ids, and stores nothing more.
func TestIdempotencyKeyedPushStoresOnce(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2)
	body := map[string]any{"items": []map[string]any{{"queue": "keyed", "payload": 1}, {"queue": "keyed", "payload": 2}}}
	s1, first := keyedPost(t, n.url("/api/v1/push"), "push-1", body)
	s2, again := keyedPost(t, n.url("/api/v1/push"), "push-1", body)
	if s1 != http.StatusCreated || s2 != http.StatusCreated || !bytes.Equal(first, again) {
		t.Fatalf("keyed push: %d %s, again %d %s", s1, first, s2, again)
	}
	if got := countRecords(t, n, "keyed"); got != 2 {
		t.Fatalf("%d messages stored, want 2", got)
	}
	if status, _ := keyedPost(t, n.url("/api/v1/push"), strings.Repeat("k", 300), body); status != http.StatusBadRequest {
		t.Fatalf("an overlong key answered %d, want 400", status)
	}
}
