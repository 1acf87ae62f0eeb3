package auth

import "testing"

// Roles grant, ALLOW bindings grant beyond them, DENY bindings refuse
// whatever the role says, admins pass every check, and each binding
// applies only to its principal, host, operation and names.
func TestACLSetDecidesWithRolesAndBindings(t *testing.T) {
	reader := &Principal{Name: "ann", Role: ReadOnly}
	writer := &Principal{Name: "bob", Role: ReadWrite, Queues: []string{"orders-*"}}
	admin := &Principal{Name: "root", Role: Admin}
	set := NewACLSet([]ACL{
		{ResourceTopic, "audit-", PatternPrefixed, "User:ann", "*", OperationWrite, PermissionAllow},
		{ResourceTopic, "orders-secret", PatternLiteral, "User:*", "*", OperationAll, PermissionDeny},
		{ResourceGroup, "*", PatternLiteral, "User:bob", "10.0.0.9", OperationRead, PermissionDeny},
		{ResourceCluster, ClusterResource, PatternLiteral, "User:ann", "*", OperationAlter, PermissionAllow},
	})
	for _, tc := range []struct {
		p      *Principal
		host   string
		action Action
		kind   Kind
		name   string
		want   bool
	}{
		{reader, "1.2.3.4", Read, Queue, "anything", true},       // the role
		{reader, "1.2.3.4", Write, Queue, "anything", false},     // the role, no binding
		{reader, "1.2.3.4", Write, Queue, "audit-2026", true},    // an ALLOW beyond the role
		{reader, "1.2.3.4", Manage, Cluster, "", true},           // ALTER on the cluster
		{reader, "1.2.3.4", Manage, Queue, "audit-2026", false},  // WRITE is not ALTER
		{writer, "1.2.3.4", Write, Queue, "orders-1", true},      // the role's pattern
		{writer, "1.2.3.4", Read, Queue, "orders-secret", false}, // DENY ALL for everyone
		{writer, "1.2.3.4", Read, Group, "g", true},              // DENY only from one host
		{writer, "10.0.0.9", Read, Group, "g", false},            // ... this one
		{writer, "1.2.3.4", Write, Queue, "audit-2026", false},   // ann's binding is not bob's
		{admin, "10.0.0.9", Read, Queue, "orders-secret", true},  // a super user
		{nil, "1.2.3.4", Read, Queue, "anything", false},         // nobody
	} {
		if got := set.Allows(tc.p, tc.host, tc.action, tc.kind, tc.name); got != tc.want {
			name := "nobody"
			if tc.p != nil {
				name = tc.p.Name
			}
			t.Errorf("%s from %s, action %d on kind %d %q: %v, want %v", name, tc.host, tc.action, tc.kind, tc.name, got, tc.want)
		}
	}
	var none *ACLSet
	if !none.Allows(reader, "h", Read, Queue, "q") || none.Allows(reader, "h", Write, Queue, "q") {
		t.Error("without bindings the role alone decides")
	}
	if !set.AllowsAnyWrite(reader, "h") || none.AllowsAnyWrite(reader, "h") {
		t.Error("ann may write through her ALLOW binding only")
	}
}

func TestFilterMatches(t *testing.T) {
	lit := ACL{ResourceTopic, "orders", PatternLiteral, "User:ann", "*", OperationRead, PermissionAllow}
	pre := ACL{ResourceTopic, "ord", PatternPrefixed, "User:ann", "*", OperationRead, PermissionAllow}
	name, bob := "orders", "User:bob"
	for _, tc := range []struct {
		f    Filter
		a    ACL
		want bool
	}{
		{Filter{ResourceAny, nil, PatternAny, nil, nil, OperationAny, PermissionAny}, lit, true},
		{Filter{ResourceTopic, &name, PatternLiteral, nil, nil, OperationAny, PermissionAny}, lit, true},
		{Filter{ResourceTopic, &name, PatternLiteral, nil, nil, OperationAny, PermissionAny}, pre, false},
		{Filter{ResourceTopic, &name, PatternMatch, nil, nil, OperationAny, PermissionAny}, pre, true},
		{Filter{ResourceGroup, nil, PatternAny, nil, nil, OperationAny, PermissionAny}, lit, false},
		{Filter{ResourceAny, nil, PatternAny, &bob, nil, OperationAny, PermissionAny}, lit, false},
		{Filter{ResourceAny, nil, PatternAny, nil, nil, OperationWrite, PermissionAny}, lit, false},
	} {
		if got := tc.f.Matches(tc.a); got != tc.want {
			t.Errorf("filter %+v on %+v: %v, want %v", tc.f, tc.a, got, tc.want)
		}
	}
}
