package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.ApiVersions.Int16(), 0, 4, answerNow(handleAPIVersions)) }

func handleAPIVersions(_ *conn, req kmsg.Request) (kmsg.Response, error) {
	return apiVersionsResponse(req.GetVersion(), 0), nil
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
