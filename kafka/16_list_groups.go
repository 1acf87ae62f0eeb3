package kafka

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.ListGroups.Int16(), 0, 5, answerNow(handleListGroups)) }

// handleListGroups lists the groups with members here and the groups that
// only have committed offsets (as Empty).
func handleListGroups(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	// Each broker lists the groups it coordinates: those of the raft
	// groups it leads, none on a broker that leads none (admin clients ask
	// every broker and merge the answers, as Kafka's brokers answer).
	var leads []uint32
	for g := range c.s.coords {
		if c.s.leading(uint32(g)) {
			leads = append(leads, uint32(g))
		}
	}
	if len(leads) == 0 {
		return resp, nil
	}
	wanted := map[string]bool{}
	for _, s := range req.StatesFilter {
		wanted[s] = true
	}
	types := map[string]bool{}
	for _, t := range req.TypesFilter {
		types[strings.ToLower(t)] = true
	}
	seen := map[string]bool{}
	add := func(name, protocolType, state, groupType string) {
		if seen[name] || (len(wanted) > 0 && !wanted[state]) || (len(types) > 0 && !types[groupType]) || !c.may(auth.Read, auth.Group, name) {
			return
		}
		seen[name] = true
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = name, protocolType, state, groupType
		resp.Groups = append(resp.Groups, g)
	}
	for _, g := range leads {
		for _, v := range c.s.coords[g].list() {
			add(v.name, v.protocolType, v.state, v.groupType)
		}
	}
	names, err := c.s.offsetGroups()
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil
	}
	for _, n := range names {
		if !slices.Contains(leads, c.s.placedIn(n)) {
			continue // another broker's
		}
		add(n, "consumer", stateEmpty, groupTypeClassic)
	}
	return resp, nil
}
