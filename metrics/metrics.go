// Package metrics holds waggle's Prometheus instruments and registry. The
// frontends and the broker record into it; GET /metrics serves it.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one node's set of instruments. A nil *Metrics records nothing,
// so packages can be used (and tested) without it.
type Metrics struct {
	registry *prometheus.Registry

	httpRequests  *prometheus.CounterVec
	httpLatency   *prometheus.HistogramVec
	kafkaRequests *prometheus.CounterVec
	kafkaLatency  *prometheus.HistogramVec
	pushOutcomes  *prometheus.CounterVec
	applyLatency  prometheus.Histogram
	leaderChanges prometheus.Counter
	kafkaThrottle prometheus.Counter
	longPolls     *prometheus.GaugeVec
}

// New creates the instruments in a fresh registry, with Go runtime and
// process metrics.
func New() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		registry: r,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "waggle_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "waggle_http_request_seconds", Help: "HTTP request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
		kafkaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "waggle_kafka_requests_total", Help: "Kafka requests by API key.",
		}, []string{"api"}),
		kafkaLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "waggle_kafka_request_seconds", Help: "Kafka request latency by API key.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"api"}),
		pushOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "waggle_push_messages_total", Help: "Pushed messages by outcome (queued, duplicate, error).",
		}, []string{"status"}),
		applyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "waggle_raft_apply_seconds", Help: "Time from handing a command to raft to its applied answer.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "waggle_raft_leader_changes_total", Help: "Leader changes this node observed.",
		}),
		kafkaThrottle: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "waggle_kafka_throttle_seconds_total", Help: "Time Kafka connections went unread because the in-flight request budget was full.",
		}),
		longPolls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "waggle_long_polls_waiting", Help: "Requests waiting for data to arrive, by kind (pop: HTTP pops, fetch: Kafka fetches).",
		}, []string{"kind"}),
	}
	r.MustRegister(m.httpRequests, m.httpLatency, m.kafkaRequests, m.kafkaLatency, m.pushOutcomes, m.applyLatency, m.leaderChanges,
		m.kafkaThrottle, m.longPolls)
	return m
}

// Handler serves the registry in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Register adds collectors (gauges read at scrape time, say).
func (m *Metrics) Register(cs ...prometheus.Collector) {
	if m != nil {
		m.registry.MustRegister(cs...)
	}
}

// HTTPRequest records one HTTP request.
func (m *Metrics) HTTPRequest(route string, code int, seconds float64) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.httpLatency.WithLabelValues(route).Observe(seconds)
}

// KafkaRequest records one Kafka request.
func (m *Metrics) KafkaRequest(api string, seconds float64) {
	if m == nil {
		return
	}
	m.kafkaRequests.WithLabelValues(api).Inc()
	m.kafkaLatency.WithLabelValues(api).Observe(seconds)
}

// PushOutcome counts pushed messages by status.
func (m *Metrics) PushOutcome(status string, n int) {
	if m != nil && n > 0 {
		m.pushOutcomes.WithLabelValues(status).Add(float64(n))
	}
}

// Applied records one raft apply's latency.
func (m *Metrics) Applied(seconds float64) {
	if m != nil {
		m.applyLatency.Observe(seconds)
	}
}

// KafkaThrottled adds time a Kafka connection waited for the in-flight budget.
func (m *Metrics) KafkaThrottled(seconds float64) {
	if m != nil {
		m.kafkaThrottle.Add(seconds)
	}
}

// LeaderChanged counts a leader change.
func (m *Metrics) LeaderChanged() {
	if m != nil {
		m.leaderChanges.Inc()
	}
}

// LongPoll counts a request of kind that starts waiting for data; the
// function it returns counts it done.
func (m *Metrics) LongPoll(kind string) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.longPolls.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}
