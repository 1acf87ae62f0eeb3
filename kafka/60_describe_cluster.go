package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.DescribeCluster.Int16(), 0, 1, answerNow(handleDescribeCluster)) }

func handleDescribeCluster(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	brokers, leader := c.brokers()
	resp.ClusterID, resp.ControllerID = clusterID, leader
	for _, b := range brokers {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.id, b.host, b.port
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
