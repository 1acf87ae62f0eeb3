package kafka

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

// The ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) manage
// Kafka ACL bindings, replicated in group 0 and consulted by waggle's one
// authorizer beside the principals' roles (auth.ACLSet.Allows) on both
// listeners. Without --auth there is no authorizer: SECURITY_DISABLED, as
// Kafka answers. Each API needs waggle's Manage on the cluster (ALTER on
// CLUSTER as an ACL): admins, or a principal an ACL allows.
func init() {
	register(kmsg.DescribeACLs.Int16(), 0, 3, answerNow(handleDescribeACLs))
	register(kmsg.CreateACLs.Int16(), 0, 3, answerNow(handleCreateACLs))
	register(kmsg.DeleteACLs.Int16(), 0, 3, answerNow(handleDeleteACLs))
}

// aclRefusal is the code every binding or filter of the request is
// answered with when the request may not run at all (0: it may).
func (c *conn) aclRefusal() int16 {
	switch {
	case !c.s.cfg.Auth.Enabled:
		return kerr.SecurityDisabled.Code
	case !c.may(auth.Manage, auth.Cluster, ""):
		return kerr.ClusterAuthorizationFailed.Code
	}
	return 0
}

func handleDescribeACLs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if resp.ErrorCode = c.aclRefusal(); resp.ErrorCode != 0 {
		return resp, nil
	}
	f := filterOf(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if msg := checkFilter(f); msg != "" {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		return resp, nil
	}
	acls, code := c.committedACLs()
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	type resource struct {
		typ, pattern int8
		name         string
	}
	at := map[resource]int{}
	for _, a := range acls {
		if !f.Matches(a) {
			continue
		}
		r := resource{a.ResourceType, a.PatternType, a.ResourceName}
		i, ok := at[r]
		if !ok {
			i = len(resp.Resources)
			at[r] = i
			rr := kmsg.NewDescribeACLsResponseResource()
			rr.ResourceType, rr.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			rr.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, rr)
		}
		ra := kmsg.NewDescribeACLsResponseResourceACL()
		ra.Principal, ra.Host = a.Principal, a.Host
		ra.Operation, ra.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, ra)
	}
	return resp, nil
}

func handleCreateACLs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	refusal := c.aclRefusal()
	var create []auth.ACL
	var at []int // the result each binding of create answers
	for i, cr := range req.Creations {
		r := &resp.Results[i]
		*r = kmsg.NewCreateACLsResponseResult()
		if r.ErrorCode = refusal; refusal != 0 {
			continue
		}
		a := auth.ACL{ResourceType: int8(cr.ResourceType), ResourceName: cr.ResourceName, PatternType: int8(cr.ResourcePatternType),
			Principal: cr.Principal, Host: normalHost(cr.Host), Operation: int8(cr.Operation), Permission: int8(cr.PermissionType)}
		if msg := checkBinding(a); msg != "" {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
			continue
		}
		create, at = append(create, a), append(at, i)
	}
	// Entries of at most MaxACLsPerEntry creations each.
	for len(create) > 0 {
		n := min(len(create), command.MaxACLsPerEntry)
		res, err := c.s.writer(0).AlterACLs(create[:n], nil)
		for j, i := range at[:n] {
			r := &resp.Results[i]
			switch {
			case err != nil:
				r.ErrorCode, r.ErrorMessage = aclWriteCode(err), kmsg.StringPtr(err.Error())
			case !res.Created[j]:
				r.ErrorCode, r.ErrorMessage = kerr.PolicyViolation.Code, kmsg.StringPtr("the cluster holds its limit of ACL bindings")
			}
		}
		create, at = create[n:], at[n:]
	}
	return resp, nil
}

func handleDeleteACLs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	refusal := c.aclRefusal()
	var acls []auth.ACL
	if refusal == 0 {
		acls, refusal = c.committedACLs()
	}
	var del []auth.ACL
	seen := map[auth.ACL]bool{}
	matched := make([][]auth.ACL, len(req.Filters))
	for i, rf := range req.Filters {
		r := &resp.Results[i]
		*r = kmsg.NewDeleteACLsResponseResult()
		if r.ErrorCode = refusal; refusal != 0 {
			continue
		}
		f := filterOf(rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		if msg := checkFilter(f); msg != "" {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
			continue
		}
		for _, a := range acls {
			if !f.Matches(a) {
				continue
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.ResourceName, kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
			matched[i] = append(matched[i], a)
			if !seen[a] {
				seen[a] = true
				del = append(del, a)
			}
		}
	}
	if len(del) == 0 {
		return resp, nil
	}
	// A filter may match every binding: entries of at most
	// MaxACLsPerEntry each. A filter whose bindings were not all deleted
	// answers the error, those that were are not undone.
	var err error
	for len(del) > 0 && err == nil {
		n := min(len(del), command.MaxACLsPerEntry)
		if _, err = c.s.writer(0).AlterACLs(nil, del[:n]); err == nil {
			del = del[n:]
		}
	}
	if err != nil {
		left := map[auth.ACL]bool{}
		for _, a := range del {
			left[a] = true
		}
		for i := range resp.Results {
			if r := &resp.Results[i]; r.ErrorCode == 0 && slices.ContainsFunc(matched[i], func(a auth.ACL) bool { return left[a] }) {
				r.ErrorCode, r.ErrorMessage, r.MatchingACLs = aclWriteCode(err), kmsg.StringPtr(err.Error()), nil
			}
		}
	}
	return resp, nil
}

// committedACLs reads the bindings once this node has applied what group
// 0 had committed when asked, so a binding created just before, through
// any node, is among them.
func (c *conn) committedACLs() ([]auth.ACL, int16) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.s.svc.CatchUp(ctx); err != nil {
		return nil, kerr.RequestTimedOut.Code
	}
	acls, err := c.s.svc.ACLs()
	if err != nil {
		return nil, kerr.UnknownServerError.Code
	}
	return acls, 0
}

// aclWriteCode is the error of an ACL change that could not be applied.
func aclWriteCode(err error) int16 {
	if errors.Is(err, broker.ErrInvalid) {
		return kerr.InvalidRequest.Code
	}
	return errCode(err)
}

// checkBinding refuses what waggle's authorizer would never consult: it
// authorizes topics, groups and the cluster, by literal names, "*" and
// prefixes, for users.
func checkBinding(a auth.ACL) string {
	switch {
	case a.ResourceType != auth.ResourceTopic && a.ResourceType != auth.ResourceGroup && a.ResourceType != auth.ResourceCluster:
		return "waggle's ACLs name TOPIC, GROUP or CLUSTER resources"
	case a.PatternType != auth.PatternLiteral && a.PatternType != auth.PatternPrefixed:
		return "a binding's pattern type is LITERAL or PREFIXED"
	case a.ResourceName == "":
		return "a binding names its resource"
	case a.ResourceType == auth.ResourceCluster && (a.PatternType != auth.PatternLiteral || a.ResourceName != auth.ClusterResource):
		return "the CLUSTER resource is the literal " + auth.ClusterResource
	case !strings.HasPrefix(a.Principal, "User:") || a.Principal == "User:":
		return "a binding's principal is User:<name> or User:*"
	case a.Host != "*" && net.ParseIP(a.Host) == nil:
		return "a binding's host is * or an IP address"
	case a.Permission != auth.PermissionAllow && a.Permission != auth.PermissionDeny:
		return "a binding's permission is ALLOW or DENY"
	case !auth.Enforced(a.Operation, a.Permission):
		return "waggle applies ALL, READ, WRITE and ALTER (its consume, produce and manage rights), and a DENY of CREATE, DELETE or ALTER_CONFIGS (which denies the manage right); describing follows READ and WRITE"
	case len(a.ResourceName) > 4096 || len(a.Principal) > 4096 || len(a.Host) > 256:
		return "a binding's names are at most 4096 bytes"
	}
	return ""
}

// filterOf is a DescribeAcls or DeleteAcls filter as the authorizer reads
// it, its host written as bindings store theirs (normalHost).
func filterOf(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) auth.Filter {
	if host != nil {
		host = kmsg.StringPtr(normalHost(*host))
	}
	return auth.Filter{ResourceType: int8(rt), ResourceName: name, PatternType: int8(pt),
		Principal: principal, Host: host, Operation: int8(op), Permission: int8(perm)}
}

// normalHost writes an IP address as the authorizer compares it (what
// net.IP.String gives for the client's address); "*" and anything else
// as it is.
func normalHost(h string) string {
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// checkFilter refuses a filter with an UNKNOWN part, as Kafka does.
func checkFilter(f auth.Filter) string {
	if f.ResourceType <= 0 || f.PatternType <= 0 || f.Operation <= 0 || f.Permission <= 0 {
		return "a filter's resource type, pattern type, operation and permission may be ANY but not UNKNOWN"
	}
	return ""
}
