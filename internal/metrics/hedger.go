package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewHedger registers the hedger's series (docs/routing.md, «The hedger»): its venue orders by
// kind and result, and each limited symbol's net exposure after its last pass. Called on the
// lease holder when the hedger starts; a process calls it once.
func (m *Metrics) NewHedger() (orders *prometheus.CounterVec, net *prometheus.GaugeVec) {
	orders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_hedge_orders_total",
		Help: "The hedger's venue orders, by kind (open: a hedge opened; close: a hedge position closed whole) and result (filled: booked in the hedge book; not_filled: not sent, refused or dropped; unknown: the answer never came, resolved by the reconciler).",
	}, []string{"kind", "result"})
	net = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fxdesk_hedge_net_exposure_lots",
		Help: "The desk's net exposure per limited symbol, in lots (B-book on the desk's side plus the hedge book; negative short), as the hedger's last pass left it.",
	}, []string{"symbol"})
	m.reg.MustRegister(orders, net)
	return orders, net
}
