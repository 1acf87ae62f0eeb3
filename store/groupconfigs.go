package store

import "errors"

// Group configs: the settings Kafka's GROUP config resource holds for one
// group (consumer.session.timeout.ms, share.auto.offset.reset, ...), set
// with IncrementalAlterConfigs and read by the group's coordinator. A
// group without any has no record.
//
//	familyGroupConfig [0x35] group name -> {name: value} (JSON, versioned;
//	encoding/json writes the names in order, so replicas write equal bytes)
const familyGroupConfig byte = 0x35

func groupConfigKey(group string) []byte { return append([]byte{familyGroupConfig}, group...) }

// GroupConfig answers the configs set on a group (nil: none).
func (t *Tx) GroupConfig(group string) (map[string]string, error) {
	b, err := t.get(groupConfigKey(group))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeJSONRecord[map[string]string](b)
}

// PutGroupConfig replaces the configs set on a group; an empty set
// removes the record.
func (t *Tx) PutGroupConfig(group string, configs map[string]string) error {
	if len(configs) == 0 {
		return t.del(groupConfigKey(group))
	}
	return t.set(groupConfigKey(group), encodeJSONRecord(configs))
}
