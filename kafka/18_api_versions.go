package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.ApiVersions.Int16(), 0, 4, answerNow(handleAPIVersions)) }

func handleAPIVersions(c *conn, req kmsg.Request) (kmsg.Response, error) {
	resp := apiVersionsResponse(req.GetVersion(), 0)
	if req.GetVersion() >= 3 {
		addFeatures(resp, c.s.svc.LogFormat())
	}
	return resp, nil
}

// transactionVersion is the feature level of Kafka transactions (KIP-1022)
// that a cluster at log format f serves: 2 (KIP-890 part 2, an epoch per
// transaction) once every member writes EndTxnBump, else 1.
func transactionVersion(f command.LogFormat) int16 {
	if f >= command.LogFormat9 {
		return 2
	}
	return 1
}

// addFeatures lists the features this broker supports and the levels the
// cluster has finalized (KIP-584): clients read transaction.version to
// pick the transaction protocol. The epoch of the finalized levels is the
// log format, which only rises.
func addFeatures(resp *kmsg.ApiVersionsResponse, f command.LogFormat) {
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, 2
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", transactionVersion(f), transactionVersion(f)
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	resp.FinalizedFeaturesEpoch = int64(f)
}

// apiVersionsResponse lists every registered API with its version range.
func apiVersionsResponse(version int16, errorCode int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = errorCode
	for _, a := range supportedAPIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
