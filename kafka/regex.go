package kafka

import (
	"fmt"
	"regexp"
	"slices"
	"sync"
	"unsafe"
)

// Broker-side regular expression subscriptions (KIP-848's
// SubscribedTopicRegex). Kafka matches a pattern against the whole topic
// name with RE2/J; Go's regexp is RE2, so a pattern is anchored at both
// ends and compiled with Go's syntax. A member's pattern is resolved again
// on each of its heartbeats, so a group follows topics as they are created
// and deleted within a heartbeat interval. Resolving is cached by the
// topic list's identity: the store hands out the same slice until a topic
// is created or deleted, so a steady group costs a map lookup, not a scan
// of every name.

// maxRegexLen bounds a subscribed pattern; longer ones are refused with
// INVALID_REGULAR_EXPRESSION.
const maxRegexLen = 4096

// maxCachedRegexes bounds the resolver's cache; when it is full the cache
// starts again empty.
const maxCachedRegexes = 1024

// compileTopicRegex compiles a subscribed pattern for whole-name matching.
func compileTopicRegex(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > maxRegexLen {
		return nil, fmt.Errorf("SubscribedTopicRegex is longer than %d bytes", maxRegexLen)
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("SubscribedTopicRegex %q is invalid: %v", pattern, err)
	}
	return re, nil
}

// regexResolver resolves subscribed patterns against the topic list.
type regexResolver struct {
	mu    sync.Mutex
	cache map[string]*resolution
	// merged is the topic list of several raft groups put together,
	// rebuilt when one group's list changes (topicNames).
	parts  [][]string
	merged []string
}

// resolution is one pattern and what it matched in one topic list.
type resolution struct {
	re       *regexp.Regexp
	internal bool    // the pattern matches the internal topic
	of       *string // the topic list it was resolved in, by identity
	ofLen    int
	matched  []string
}

func sameList(a []string, of *string, n int) bool {
	return unsafe.SliceData(a) == of && len(a) == n
}

// resolve lists the topics in names (sorted) that pattern matches whole,
// and reports whether it matches the internal topic, which is in no
// store's list. The answer is shared and must not be changed.
func (r *regexResolver) resolve(pattern string, names []string) (matched []string, internal bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.cache[pattern]
	if res == nil {
		re, err := compileTopicRegex(pattern)
		if err != nil {
			return nil, false, err
		}
		if len(r.cache) >= maxCachedRegexes || r.cache == nil {
			r.cache = map[string]*resolution{}
		}
		res = &resolution{re: re, internal: re.MatchString(consumerOffsetsTopic)}
		r.cache[pattern] = res
	} else if sameList(names, res.of, res.ofLen) {
		return res.matched, res.internal, nil
	}
	for _, n := range names {
		if res.re.MatchString(n) {
			matched = append(matched, n)
		}
	}
	res.of, res.ofLen, res.matched = unsafe.SliceData(names), len(names), matched
	return matched, res.internal, nil
}

// topicNames lists every topic of the node's raft groups in name order.
// With one group it is the store's own list; with several, their lists
// merged, merged again only when one of them changed.
func (s *Server) topicNames() []string {
	groups := s.everyGroup()
	if len(groups) <= 1 {
		return s.svc.TopicNames()
	}
	parts := make([][]string, len(groups))
	for i, b := range groups {
		parts[i] = b.TopicNames()
	}
	r := &s.regexes
	r.mu.Lock()
	defer r.mu.Unlock()
	same := len(parts) == len(r.parts)
	for i := 0; same && i < len(parts); i++ {
		same = sameList(parts[i], unsafe.SliceData(r.parts[i]), len(r.parts[i]))
	}
	if !same {
		var merged []string
		for _, p := range parts {
			merged = append(merged, p...)
		}
		slices.Sort(merged)
		r.parts, r.merged = parts, merged
	}
	return r.merged
}
