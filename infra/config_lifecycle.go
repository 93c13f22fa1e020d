package infra

import "time"

// Lifecycle holds the order lifecycle's settings (issue 25).
type Lifecycle struct {
	// PayWindow: an order must be paid within it, counted from the claim,
	// or it is cancelled (expired) and its unit goes back on sale. 0: orders
	// never expire, as the original.
	PayWindow time.Duration `env:"SECKILL_PAY_WINDOW" envDefault:"15m"`
	// PaymentSecret keys the HMAC-SHA256 that signs payment notifications
	// (POST /payments/notify, header X-Seckill-Signature); empty leaves the
	// route unmounted.
	PaymentSecret string `env:"SECKILL_PAYMENT_SECRET"`
	// ReclaimAfterCancel lets the buyer of a cancelled or expired order claim
	// the voucher again (a new order; the cancelled one stays on record).
	// Off, the default, the order forfeits the place: it still counts toward
	// the buyer's one order per voucher, and a later claim answers duplicate,
	// so a few accounts cannot hold the stock by letting orders lapse.
	ReclaimAfterCancel bool `env:"SECKILL_RECLAIM_AFTER_CANCEL" envDefault:"false"`
}

// expiryEvery is how often an instance expires due orders and finishes the
// returns a crash left: well inside the promised 5 s.
const expiryEvery = time.Second

// expiryBatch bounds one expiry transaction; a full batch is followed by
// another at once.
const expiryBatch = 500

// minPaymentSecret: a shorter secret can be guessed offline from one
// signed notification.
const minPaymentSecret = 16

func (l Lifecycle) check(p *problems) {
	if l.PayWindow < 0 || (l.PayWindow > 0 && l.PayWindow < time.Second) || l.PayWindow > 7*24*time.Hour {
		p.add("SECKILL_PAY_WINDOW", "must be 0 (never expire) or within 1s..168h, got %s", l.PayWindow)
	}
	if l.PaymentSecret != "" && len(l.PaymentSecret) < minPaymentSecret {
		p.add("SECKILL_PAYMENT_SECRET", "must be at least %d bytes (or empty: payments off)", minPaymentSecret)
	}
}
