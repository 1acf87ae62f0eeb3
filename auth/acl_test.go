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

// The checks the review of the first version found missing: a DENY on the
// cluster holds against an ALLOW on it also before a body is read; a DENY
// of one manage operation denies the manage right; a DENY of every name
// stops the check before the body; an unreadable set fails closed.
func TestACLSetDenialsHold(t *testing.T) {
	bob := &Principal{Name: "bob", Role: ReadWrite}
	set := NewACLSet([]ACL{
		{ResourceCluster, ClusterResource, PatternLiteral, "User:*", "*", OperationAlter, PermissionAllow},
		{ResourceCluster, ClusterResource, PatternLiteral, "User:bob", "*", OperationAll, PermissionDeny},
		{ResourceTopic, "orders", PatternLiteral, "User:bob", "*", OperationDelete, PermissionDeny},
		{ResourceGroup, "", PatternPrefixed, "User:bob", "*", OperationRead, PermissionDeny},
	})
	if set.AllowsSome(bob, "h", Manage, Cluster) || set.AllowsSome(bob, "h", Read, Cluster) {
		t.Error("bob passes the cluster check before the body despite his DENY ALL on the cluster")
	}
	if set.Allows(&Principal{Name: "carol", Role: ReadOnly, Queues: []string{"x"}}, "h", Manage, Cluster, "") == false {
		t.Error("carol's ALLOW ALTER on the cluster does not hold")
	}
	grant := NewACLSet([]ACL{
		{ResourceTopic, "orders", PatternLiteral, "User:bob", "*", OperationAlter, PermissionAllow},
		{ResourceTopic, "orders", PatternLiteral, "User:bob", "*", OperationDelete, PermissionDeny},
	})
	if grant.Allows(bob, "h", Manage, Queue, "orders") {
		t.Error("a DENY DELETE did not deny the manage right")
	}
	if set.AllowsSome(bob, "h", Read, Group) || !set.AllowsSome(bob, "h", Read, Queue) {
		t.Error("a DENY of every group name must stop the check before the body, and only for groups")
	}
	if Unreadable.Allows(bob, "h", Read, Queue, "q") || Unreadable.AllowsSome(bob, "h", Read, Queue) || Unreadable.AllowsAnyWrite(bob, "h") {
		t.Error("an unreadable set let a non-admin through")
	}
	if !Unreadable.Allows(&Principal{Name: "root", Role: Admin}, "h", Read, Queue, "q") {
		t.Error("an unreadable set refused an admin")
	}
	for op, want := range map[int8]bool{OperationRead: true, OperationAll: true, OperationCreate: false, 8 /* DESCRIBE */ : false, 12 /* IDEMPOTENT_WRITE */ : false} {
		if Enforced(op, PermissionAllow) != want {
			t.Errorf("Enforced(%d, ALLOW) = %v, want %v", op, !want, want)
		}
	}
	if !Enforced(OperationCreate, PermissionDeny) {
		t.Error("a DENY CREATE is not enforced")
	}
}
