package auth

import "strings"

// ACL is one Kafka ACL binding (KIP-140): a principal ("User:<name>", or
// "User:*" for every one) connecting from Host ("*" or an IP address) is
// allowed or denied an operation on the resources a pattern names. The
// numbers are Kafka's wire values (kmsg.ACLResourceType and the rest).
type ACL struct {
	ResourceType int8   `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  int8   `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

// Kafka's numbers for the parts of a binding waggle's authorizer reads.
const (
	ResourceAny     int8 = 1
	ResourceTopic   int8 = 2
	ResourceGroup   int8 = 3
	ResourceCluster int8 = 4

	PatternAny      int8 = 1
	PatternMatch    int8 = 2
	PatternLiteral  int8 = 3
	PatternPrefixed int8 = 4

	OperationAny          int8 = 1
	OperationAll          int8 = 2
	OperationRead         int8 = 3
	OperationWrite        int8 = 4
	OperationCreate       int8 = 5
	OperationDelete       int8 = 6
	OperationAlter        int8 = 7
	OperationAlterConfigs int8 = 11

	PermissionAny   int8 = 1
	PermissionDeny  int8 = 2
	PermissionAllow int8 = 3
)

// ClusterResource is the name of Kafka's one CLUSTER resource.
const ClusterResource = "kafka-cluster"

// operationOf is the Kafka operation an action asks: consuming is READ,
// producing and pushing WRITE, and creating, configuring and deleting
// (waggle's Manage) ALTER.
func operationOf(a Action) int8 {
	switch a {
	case Read:
		return OperationRead
	case Write:
		return OperationWrite
	}
	return OperationAlter
}

// resourceOf is the Kafka resource type of a kind.
func resourceOf(k Kind) int8 {
	switch k {
	case Queue:
		return ResourceTopic
	case Group:
		return ResourceGroup
	}
	return ResourceCluster
}

// Enforced reports whether the authorizer applies a binding of operation
// op with permission: ALL, READ, WRITE and ALTER (waggle's consume,
// produce and manage rights) either way, and a DENY of CREATE, DELETE or
// ALTER_CONFIGS, which denies the manage right they are part of. Kafka
// grants those three separately, waggle only together: an ALLOW of one of
// them would grant more, or nothing, so it is not applied.
func Enforced(op, permission int8) bool {
	switch op {
	case OperationAll, OperationRead, OperationWrite, OperationAlter:
		return true
	case OperationCreate, OperationDelete, OperationAlterConfigs:
		return permission == PermissionDeny
	}
	return false
}

// covers reports whether a binding's operation applies to op, the one an
// action asks (operationOf).
func (a ACL) covers(op int8) bool {
	return a.Operation == op || a.Operation == OperationAll || (op == OperationAlter && a.Permission == PermissionDeny && Enforced(a.Operation, PermissionDeny))
}

// ACLSet is the bindings in force, by resource type; nil holds none. It is
// not changed once made.
type ACLSet struct {
	byType map[int8][]ACL
	// unreadable: the bindings could not be read; only admins pass.
	unreadable bool
}

// Unreadable is the set of a node that could not read its bindings: it
// fails closed, refusing everyone but admins, so a DENY is never skipped.
var Unreadable = &ACLSet{unreadable: true}

// NewACLSet indexes bindings.
func NewACLSet(acls []ACL) *ACLSet {
	if len(acls) == 0 {
		return nil
	}
	s := &ACLSet{byType: map[int8][]ACL{}}
	for _, a := range acls {
		s.byType[a.ResourceType] = append(s.byType[a.ResourceType], a)
	}
	return s
}

// Allows is waggle's one authorizer, for both listeners: whether p,
// connecting from host, may do action on the resource of kind named name.
// An admin may do everything (Kafka's super user). Otherwise a DENY
// binding that matches refuses, whatever the role says; then the role and
// its patterns (Principal.Allows) grant, and an ALLOW binding grants
// beyond them.
func (s *ACLSet) Allows(p *Principal, host string, action Action, kind Kind, name string) bool {
	if allowed, decided := s.decided(p); decided {
		return allowed
	}
	if kind == Cluster {
		name = ClusterResource
	}
	named := func(a ACL) bool { return a.names(name) }
	if s.binds(p, host, PermissionDeny, action, kind, named) {
		return false
	}
	return p.Allows(action, kind, name) || s.binds(p, host, PermissionAllow, action, kind, named)
}

// AllowsAnyWrite reports whether p may write to some queue, by its role or
// by an ALLOW binding for WRITE (Kafka's InitProducerId asks it).
func (s *ACLSet) AllowsAnyWrite(p *Principal, host string) bool {
	if allowed, decided := s.decided(p); decided {
		return allowed
	}
	return p.AllowsAnyWrite() || s.binds(p, host, PermissionAllow, Write, Queue, anyName)
}

// AllowsSome reports whether p may do action on some resource of kind:
// its role on any name, or an ALLOW binding, unless a DENY covers every
// name of the kind (the HTTP listener asks it before reading a body that
// names the resources, then Allows of each). The cluster has one name:
// Allows decides.
func (s *ACLSet) AllowsSome(p *Principal, host string, action Action, kind Kind) bool {
	if kind == Cluster {
		return s.Allows(p, host, action, kind, "")
	}
	if allowed, decided := s.decided(p); decided {
		return allowed
	}
	everyName := func(a ACL) bool {
		return (a.PatternType == PatternLiteral && a.ResourceName == "*") || (a.PatternType == PatternPrefixed && a.ResourceName == "")
	}
	if s.binds(p, host, PermissionDeny, action, kind, everyName) {
		return false
	}
	role := *p
	role.Queues, role.Groups = nil, nil
	return role.Allows(action, kind, "") || s.binds(p, host, PermissionAllow, action, kind, anyName)
}

// decided settles a check before any binding is read: nobody is refused,
// an admin allowed, and everyone else refused by an unreadable set.
func (s *ACLSet) decided(p *Principal) (allowed, decided bool) {
	switch {
	case p == nil:
		return false, true
	case p.Role == Admin:
		return true, true
	case s != nil && s.unreadable:
		return false, true
	}
	return false, false
}

func anyName(ACL) bool { return true }

// binds reports whether a binding of permission for p at host covers the
// operation action asks on resources of kind, among those names accepts.
func (s *ACLSet) binds(p *Principal, host string, permission int8, action Action, kind Kind, names func(ACL) bool) bool {
	if s == nil {
		return false
	}
	op := operationOf(action)
	for _, a := range s.byType[resourceOf(kind)] {
		if a.Permission == permission && a.covers(op) && a.appliesTo(p, host) && names(a) {
			return true
		}
	}
	return false
}

// appliesTo reports whether the binding is for p at host.
func (a ACL) appliesTo(p *Principal, host string) bool {
	return (a.Principal == "User:*" || a.Principal == "User:"+p.Name) && (a.Host == "*" || a.Host == host)
}

// names reports whether the binding's pattern covers the resource name.
func (a ACL) names(name string) bool {
	switch a.PatternType {
	case PatternLiteral:
		return a.ResourceName == name || a.ResourceName == "*"
	case PatternPrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	}
	return false
}

// Filter is what DescribeAcls and DeleteAcls match bindings with: a field
// of Any (or an empty string) matches every binding; PatternMatch
// matches the bindings that would apply to the name (literal, wildcard
// and prefixes of it).
type Filter struct {
	ResourceType int8
	ResourceName *string
	PatternType  int8
	Principal    *string
	Host         *string
	Operation    int8
	Permission   int8
}

// Matches reports whether the filter selects binding a.
func (f Filter) Matches(a ACL) bool {
	switch {
	case f.ResourceType != ResourceAny && f.ResourceType != a.ResourceType,
		f.Principal != nil && *f.Principal != a.Principal,
		f.Host != nil && *f.Host != a.Host,
		f.Operation != OperationAny && f.Operation != a.Operation,
		f.Permission != PermissionAny && f.Permission != a.Permission:
		return false
	}
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == nil || *f.ResourceName == a.ResourceName
	case PatternMatch:
		return f.ResourceName == nil || a.names(*f.ResourceName)
	}
	return f.PatternType == a.PatternType && (f.ResourceName == nil || *f.ResourceName == a.ResourceName)
}
