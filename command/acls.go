package command

import "github.com/waggle-mq/waggle/store"

// AlterACLsCommand creates and deletes Kafka ACL bindings (CreateAcls,
// DeleteAcls). The leader checked each binding and turned delete filters
// into the bindings they match; the state machine deletes those that
// still exist, then creates the new ones while the cluster holds fewer
// than store.MaxACLs.
type AlterACLsCommand struct {
	Create []store.ACL
	Delete []store.ACL
}

// AlterACLsResult answers each creation (false: the cluster holds
// store.MaxACLs bindings already) and each deletion (false: not there).
type AlterACLsResult struct {
	Created []bool
	Deleted []bool
}

// MaxACLsPerEntry bounds the bindings one entry creates or deletes.
const MaxACLsPerEntry = 1000

func (c *AlterACLsCommand) since() LogFormat { return LogFormat10 }

// Encode returns the raft entry for the command.
func (c *AlterACLsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAlterACLs))
	for _, list := range [][]store.ACL{c.Create, c.Delete} {
		e.uvarint(uint64(len(list)))
		for _, a := range list {
			e.byte(byte(a.ResourceType))
			e.string(a.ResourceName)
			e.byte(byte(a.PatternType))
			e.string(a.Principal)
			e.string(a.Host)
			e.byte(byte(a.Operation))
			e.byte(byte(a.Permission))
		}
	}
	return e.b
}

func decodeAlterACLs(b []byte) (*AlterACLsCommand, error) {
	d := decoder{b: b}
	c := &AlterACLsCommand{}
	for _, list := range []*[]store.ACL{&c.Create, &c.Delete} {
		n := d.count(7)
		for range n {
			*list = append(*list, store.ACL{ResourceType: int8(d.byte()), ResourceName: d.string(), PatternType: int8(d.byte()),
				Principal: d.string(), Host: d.string(), Operation: int8(d.byte()), Permission: int8(d.byte())})
		}
	}
	return c, d.finish()
}
