package node

import (
	"fmt"
	"testing"
)

// A node is judged odd only when more than half of all the other voters
// run one other count, and only once more than half of them answered.
func TestJudgeGroupCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		count    int
		others   int
		answered map[string]int
		done     bool
		other    int
		ids      []string
	}{
		{"too few answers", 1, 3, map[string]int{"2": 3}, false, 0, nil},
		{"half is not more than half", 1, 4, map[string]int{"2": 3, "3": 3}, false, 0, nil},
		{"all agree", 3, 2, map[string]int{"1": 3, "2": 3}, true, 0, nil},
		{"the odd one out", 1, 2, map[string]int{"3": 3, "1": 3}, true, 3, []string{"1", "3"}},
		{"one odd other", 3, 2, map[string]int{"1": 3, "4": 1}, true, 0, nil},
		{"a majority of all others, not all answered", 1, 4, map[string]int{"2": 3, "3": 3, "5": 3}, true, 3, []string{"2", "3", "5"}},
		{"others split between counts", 1, 4, map[string]int{"2": 3, "3": 3, "4": 5, "5": 5}, true, 0, nil},
		{"two nodes: neither can tell", 1, 1, map[string]int{"2": 3}, true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, other, ids := judgeGroupCounts(tc.count, tc.others, tc.answered)
			if done != tc.done || other != tc.other || fmt.Sprint(ids) != fmt.Sprint(tc.ids) {
				t.Errorf("judgeGroupCounts(%d, %d, %v) = %v, %d, %v; want %v, %d, %v",
					tc.count, tc.others, tc.answered, done, other, ids, tc.done, tc.other, tc.ids)
			}
		})
	}
}
