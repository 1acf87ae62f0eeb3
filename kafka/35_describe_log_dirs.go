package kafka

import (
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
)

// DescribeLogDirs v0–4: v1 throttle, v2 flexible, v3 a top-level error
// code, v4 the volume's total and usable bytes.
func init() { register(kmsg.DescribeLogDirs.Int16(), 0, 4, answerNow(handleDescribeLogDirs)) }

// handleDescribeLogDirs answers this node's one log directory, its data
// directory (Config.DataDir): every node holds every partition (one raft
// group), so each answers for all of them from its own store. A partition's
// size is broker.Service.PartitionSizes: a topic's kept segment bytes
// shared among its partitions (exact for one partition), read without
// touching the data. Null topics ask for every topic the principal may
// see (the internal topic too, size 0); a topic or partition that does not
// exist is left out, as Kafka leaves out what a broker does not hold.
// OffsetLag is 0 and IsFuture false: there are no replica moves.
func handleDescribeLogDirs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = c.logDir()
	if req.Version >= 4 {
		dir.TotalBytes, dir.UsableBytes = volumeBytes(dir.Dir)
	}

	var names []string // nil: all
	wanted := map[string][]int32{}
	if req.Topics != nil {
		for _, rt := range req.Topics {
			if _, seen := wanted[rt.Topic]; !seen {
				names = append(names, rt.Topic)
			}
			wanted[rt.Topic] = append(wanted[rt.Topic], rt.Partitions...)
		}
	}
	var topics []broker.TopicInfo
	if names == nil && req.Topics != nil {
		// an empty list asks for nothing
	} else if all, err := c.s.topics(names); err != nil {
		return nil, err
	} else {
		topics = all
	}
	internal := req.Topics == nil
	if _, named := wanted[consumerOffsetsTopic]; named {
		internal = true
	}
	for _, t := range topics {
		if !c.describable(t.Name) || isInternalTopic(t.Name) {
			continue
		}
		if _, remote := c.s.topic(t.Name).(*Remote); remote {
			continue // as a Kafka broker, this one lists only the replicas it hosts
		}
		sizes, err := c.s.topic(t.Name).PartitionSizes(t)
		if err != nil {
			return nil, err
		}
		if rt, ok := logDirTopic(t.Name, sizes, wanted[t.Name], req.Topics == nil); ok {
			dir.Topics = append(dir.Topics, rt)
		}
	}
	if internal && c.describable(consumerOffsetsTopic) {
		if rt, ok := logDirTopic(consumerOffsetsTopic, make([]int64, consumerOffsetsPartitions), wanted[consumerOffsetsTopic], req.Topics == nil); ok {
			dir.Topics = append(dir.Topics, rt)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}

// logDirTopic describes the partitions of a topic asked for (every one
// when all), given each partition's size; ok is false when none of them
// exists.
func logDirTopic(name string, sizes []int64, asked []int32, all bool) (kmsg.DescribeLogDirsResponseDirTopic, bool) {
	rt := kmsg.NewDescribeLogDirsResponseDirTopic()
	rt.Topic = name
	add := func(p int32) {
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = p, sizes[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	if all {
		for p := range int32(len(sizes)) {
			add(p)
		}
	}
	seen := map[int32]bool{}
	for _, p := range asked {
		if p >= 0 && int(p) < len(sizes) && !seen[p] {
			seen[p] = true
			add(p)
		}
	}
	return rt, len(rt.Partitions) > 0
}

// logDir is the directory DescribeLogDirs names: the node's data
// directory, absolute.
func (c *conn) logDir() string {
	dir := c.s.cfg.DataDir
	if dir == "" {
		return "waggle-data"
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// volumeBytes is the size of dir's file system and the bytes left to
// unprivileged writers (statfs), or -1 and -1 when unknown.
func volumeBytes(dir string) (total, usable int64) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return -1, -1
	}
	return int64(fs.Blocks) * int64(fs.Bsize), int64(fs.Bavail) * int64(fs.Bsize)
}
