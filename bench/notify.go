package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// NotifyCost measures what listening relays cost the producers: Enqueue
// of one message per transaction (closed loop, each client in its own
// transaction) with no relay running, then with relays running (on
// PostgreSQL they LISTEN, and producers NOTIFY while one sleeps), in
// rounds that alternate which goes first. A NOTIFY serialises the commits
// of every notifying transaction (PostgreSQL takes one lock for the
// notification queue from the commit until its end), so with fsync on,
// notifying producers commit one at a time. The relays publish to a no-op
// publisher and mark rows published. With cfg.Rate the producers are
// offered that many messages per second (open loop) rather than running
// flat out: what the relays then cost shows as a rate not reached and as
// the producers' p99.
//
// listen false runs relays that only poll (ListenOff): beside the default
// it tells the NOTIFY's share of the cost from the relays' own work.
func NotifyCost(ctx context.Context, db *sqlcoord.DB, cfg Config, relays, rounds int, listen bool) ([]Result, error) {
	cfg.defaults()
	s := &suite{db: db, cfg: cfg, group: "outbox-notify"}
	ob := outbox.New(db)
	op := func(ctx context.Context, _ int) error {
		return ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
	}
	without, with := "enqueue, no relay", fmt.Sprintf("enqueue, %d relay(s) running", relays)
	mode := outbox.ListenAuto
	if !listen {
		mode = outbox.ListenOff
		with = fmt.Sprintf("enqueue, %d polling relay(s) running", relays)
	}
	if cfg.Rate > 0 {
		offered := fmt.Sprintf(", %.0f msgs/s offered", cfg.Rate)
		without, with = without+offered, with+offered
	}
	withRelays := func(c int) error {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		for i := 0; i < relays; i++ {
			r, err := outbox.NewRelay(db, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }),
				outbox.RelayOptions{Logger: quiet, Listen: mode})
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() { defer wg.Done(); r.Run(rctx) }()
		}
		time.Sleep(500 * time.Millisecond) // relays listening and asleep
		s.run(ctx, with, without, c, op)
		cancel()
		wg.Wait()
		return nil
	}
	for _, c := range cfg.Clients {
		for round := 0; round < rounds; round++ {
			if round%2 == 1 {
				if err := withRelays(c); err != nil {
					return s.out, err
				}
			}
			s.run(ctx, without, "", c, op)
			if round%2 == 0 {
				if err := withRelays(c); err != nil {
					return s.out, err
				}
			}
			if _, err := db.ExecContext(ctx, `DELETE FROM coord_outbox`); err != nil {
				return s.out, err
			}
		}
	}
	return s.out, nil
}
