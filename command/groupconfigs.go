package command

// AlterGroupConfigCommand sets and removes configs of one group (Kafka's
// GROUP config resource). The caller checked the names and values; the
// state machine applies the changes in order to what the group has, so
// two alters racing each other both take effect, as in Kafka. Replace
// removes every config first (AlterConfigs, which is not incremental).
// The answer is nothing.
type AlterGroupConfigCommand struct {
	Group   string
	Replace bool
	Changes []GroupConfigChange
}

// GroupConfigChange sets Name to Value, or removes it (Remove).
type GroupConfigChange struct {
	Name, Value string
	Remove      bool
}

// MaxGroupConfigs bounds how many configs one group may have set (Kafka
// defines about a dozen).
const MaxGroupConfigs = 64

func (c *AlterGroupConfigCommand) since() LogFormat { return LogFormat7 }

// Encode returns the raft entry for the command.
func (c *AlterGroupConfigCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAlterGroupConfig))
	e.string(c.Group)
	e.bool(c.Replace)
	e.uvarint(uint64(len(c.Changes)))
	for _, ch := range c.Changes {
		e.string(ch.Name)
		e.string(ch.Value)
		e.bool(ch.Remove)
	}
	return e.b
}

func decodeAlterGroupConfig(b []byte) (*AlterGroupConfigCommand, error) {
	d := decoder{b: b}
	c := &AlterGroupConfigCommand{Group: d.string(), Replace: d.byte() == 1}
	c.Changes = make([]GroupConfigChange, d.count(3))
	for i := range c.Changes {
		c.Changes[i] = GroupConfigChange{Name: d.string(), Value: d.string(), Remove: d.byte() == 1}
	}
	return c, d.finish()
}
