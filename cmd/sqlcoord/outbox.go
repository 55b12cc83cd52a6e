package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/pgxv5"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
)

// checkPublisher refuses a --publisher spec publisherFor cannot build,
// without connecting anywhere.
func checkPublisher(spec string) error {
	for _, p := range []string{"nats://", "http://", "https://", "kafka://"} {
		if strings.HasPrefix(spec, p) && len(spec) > len(p) {
			return nil
		}
	}
	if spec == "stdout" {
		return nil
	}
	return usageError{fmt.Errorf("--publisher %q: want stdout, nats://host:4222, kafka://host:9092[,host2], or http(s)://…", redact.URL(spec))}
}

// publisherFor builds a publisher from --publisher.
func publisherFor(spec string, cmd *cobra.Command) (outbox.Publisher, func(), error) {
	switch {
	case spec == "stdout":
		return outbox.WriterPublisher{W: cmd.OutOrStdout()}, func() {}, nil
	case strings.HasPrefix(spec, "nats://"), strings.HasPrefix(spec, "kafka://"):
		return brokerPublisher(spec)
	case strings.HasPrefix(spec, "http://"), strings.HasPrefix(spec, "https://"):
		return outbox.HTTPPublisher{URL: spec}, func() {}, nil
	}
	return nil, nil, usageError{fmt.Errorf("--publisher %q: want stdout, nats://host:4222, kafka://host:9092[,host2], or http(s)://…", spec)}
}

// loopbackDefault makes an address without a host (":9090") bind loopback
// only: the endpoints have no authentication, so exposing them must be
// asked for with an explicit host (0.0.0.0:9090).
func loopbackDefault(addr string) (string, error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr // a port alone
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %v (want host:port or :port)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

func newRelayCmd() *cobra.Command {
	var pubSpec, listen, listenNotify, listenDSN, mode, group, streamDSN, topicsS string
	var batch, maxAttempts, sleepBelow int
	var pollBusy time.Duration
	var ordered, del, unbounded bool
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run the outbox relay as a daemon (SIGINT/SIGTERM stop it gracefully)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// every usage error before anything connects
			addr, err := metricsAddr(listen)
			if err != nil {
				return err
			}
			if err := checkPublisher(pubSpec); err != nil {
				return err
			}
			var topics []string
			if topicsS != "" {
				for _, t := range strings.Split(topicsS, ",") {
					if t = strings.TrimSpace(t); t == "" {
						return usageError{fmt.Errorf("--topics %q: an empty topic", redact.Text(topicsS))}
					}
					topics = append(topics, t)
				}
			}
			if listenDSN == "" {
				listenDSN = os.Getenv("SQLCOORD_LISTEN_DSN")
			}
			var listener sqlcoord.Listener
			if listenDSN != "" {
				l, err := pgxv5.NewDSNListener(listenDSN)
				if err != nil {
					return usageError{fmt.Errorf("--listen-dsn: %w", err)}
				}
				listener = l
			}
			switch outbox.ListenMode(listenNotify) {
			case outbox.ListenAuto, outbox.ListenOn, outbox.ListenOff:
			default:
				return usageError{fmt.Errorf("--listen-notify %q: want auto, on or off", listenNotify)}
			}
			if batch < 1 || maxAttempts < 1 {
				return usageError{fmt.Errorf("--batch %d, --max-attempts %d: want at least 1", batch, maxAttempts)}
			}
			if pollBusy < 0 {
				return usageError{fmt.Errorf("--poll-busy %v: want a duration ≥ 0", pollBusy)}
			}
			switch mode {
			case "poll", "stream", "auto":
			default:
				return usageError{fmt.Errorf("--mode %q: want poll, stream or auto", mode)}
			}
			if streamDSN == "" {
				streamDSN = os.Getenv("SQLCOORD_STREAM_DSN")
			}
			pub, closeFn, err := publisherFor(pubSpec, cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			// the relay's publishes and every call it makes
			db, reg, err := openMetered(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			reg.relayCollectors(db)
			logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			opt := outbox.RelayOptions{BatchSize: batch, Ordered: ordered, DeleteOnPublish: del, Topics: topics,
				MaxAttempts: maxAttempts, Listen: outbox.ListenMode(listenNotify), Logger: logger,
				PollBusy: pollBusy, SleepBelow: sleepBelow}
			opt.Listener = listener
			poll, err := outbox.NewRelay(db, pub, opt)
			if err != nil {
				return usageError{err}
			}
			var r relayRunner = poll
			// auto: the server (or this user, or a pooler) cannot stream
			pollInstead := func(why error) {
				logger.Warn("relay mode auto: polling", "reason", redact.Text(why.Error()))
				r = poll
			}
			if mode != "poll" {
				st, err := pgstream.New(db, pub, pgstream.Options{DSN: streamDSN, Group: group, BatchSize: batch, Topics: topics,
					DeleteOnPublish: del, MaxAttempts: maxAttempts, AllowUnboundedSlot: unbounded, Logger: logger})
				switch {
				case err == nil:
					r = st
					if mode == "auto" {
						if cerr := outbox.CanStream(cmd.Context(), db); cerr != nil {
							pollInstead(cerr)
						}
					}
				case mode == "auto" && errors.Is(err, outbox.ErrStreamUnsupported):
					pollInstead(err)
				default:
					return usageError{err}
				}
			}
			if listen != "" {
				stop, err := serveMetrics(addr, reg, logger, "health and metrics", func(mux *http.ServeMux) {
					mux.HandleFunc("/healthz", func(w http.ResponseWriter, req *http.Request) {
						// A status only: the error (user, database, address)
						// goes to the operator's log, not to any caller.
						if h := r.Health(); !h.OK() {
							http.Error(w, fmt.Sprintf("unavailable: the last %d batch(es) failed", h.Failing), http.StatusServiceUnavailable)
							return
						}
						if err := db.PingContext(req.Context()); err != nil {
							logger.Warn("healthz: database unreachable", "err", redact.Text(err.Error(), dsnFrom(cmd)))
							http.Error(w, "unavailable", http.StatusServiceUnavailable)
							return
						}
						fmt.Fprintln(w, "ok")
					})
				})
				if err != nil {
					return err
				}
				defer stop()
			}
			if st, ok := r.(*pgstream.Relay); ok {
				logger.Info("relay running", "mode", "stream", "group", group, "database", db.String(), "publisher", redact.URL(pubSpec))
				err := st.Run(cmd.Context())
				if mode != "auto" || !errors.Is(err, outbox.ErrStreamUnsupported) {
					return err
				}
				pollInstead(err) // refused when it connected (privilege, pooler)
			}
			logger.Info("relay running", "mode", "poll", "database", db.String(), "publisher", redact.URL(pubSpec))
			return r.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&pubSpec, "publisher", "stdout", "stdout, nats://host:4222, kafka://host:9092[,host2], http(s)://webhook")
	cmd.Flags().StringVar(&listen, "listen", "", "address for /healthz and /metrics: 9090 or :9090 bind 127.0.0.1; give 0.0.0.0:9090 to expose them, unauthenticated. /healthz answers 503 while batches fail")
	cmd.Flags().StringVar(&listenNotify, "listen-notify", "auto", "PostgreSQL LISTEN for new messages besides polling: auto (listen after a probe NOTIFY proves delivery; behind PgBouncer in transaction mode it logs why and polls), on, off")
	cmd.Flags().StringVar(&listenDSN, "listen-dsn", "", "PostgreSQL DSN to LISTEN on instead of --dsn (a direct connection when --dsn goes through PgBouncer); also SQLCOORD_LISTEN_DSN")
	cmd.Flags().IntVar(&batch, "batch", 100, "messages per claim")
	cmd.Flags().IntVar(&maxAttempts, "max-attempts", 10, "attempts before dead-lettering")
	cmd.Flags().DurationVar(&pollBusy, "poll-busy", 0, "pause after a batch while the relay stays awake (default 2ms; longer: less server CPU, later delivery)")
	cmd.Flags().IntVar(&sleepBelow, "sleep-below", 0, "PostgreSQL: messages per second below which the relay sleeps after each batch and producers NOTIFY it (default 250; -1: only after idle polls)")
	cmd.Flags().BoolVar(&ordered, "ordered", false, "publish messages of one key in order")
	cmd.Flags().BoolVar(&del, "delete", false, "delete published rows instead of marking them")
	cmd.Flags().StringVar(&mode, "mode", "poll", "poll (claim batches), stream (PostgreSQL logical replication: commit order, no polling while idle; needs wal_level=logical and a user with REPLICATION) or auto (stream where the server allows it, else poll, saying why)")
	cmd.Flags().StringVar(&topicsS, "topics", "", "only these topics, comma-separated (default: all): one relay group per set of topics, e.g. a slow publisher's apart; every topic needs a relay whose filter includes it")
	cmd.Flags().StringVar(&group, "group", "outbox", "stream mode: the relay group (one replication slot and one active streamer per group)")
	cmd.Flags().StringVar(&streamDSN, "stream-dsn", "", "stream mode: PostgreSQL DSN for the replication connection, directly to the primary (default: --dsn); also SQLCOORD_STREAM_DSN")
	cmd.Flags().BoolVar(&unbounded, "allow-unbounded-slot", false, "stream mode: create the slot even when max_slot_wal_keep_size is -1 (an abandoned slot then keeps WAL until the disk fills)")
	var dropGroup string
	drop := &cobra.Command{Use: "drop-slot", Short: "Drop a retired stream group's replication slot (PostgreSQL; it fails while a relay streams from it)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openDB(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := outbox.DropStreamSlot(cmd.Context(), db, dropGroup); err != nil {
				if errors.Is(err, outbox.ErrInvalid) {
					return usageError{err}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dropped the slot of group %s (if it existed)\n", dropGroup)
			return nil
		}}
	drop.Flags().StringVar(&dropGroup, "group", "outbox", "the relay group")
	cmd.AddCommand(drop)
	return cmd
}

// relayRunner is a polling or a streaming relay.
type relayRunner interface {
	Run(ctx context.Context) error
	Health() outbox.Health
}

func newOutboxCmd() *cobra.Command {
	cmd := groupCmd("outbox", "Inspect the outbox: stats, dead letters, requeue")
	withOutbox := func(a access, fn func(cmd *cobra.Command, args []string, ob *outbox.Outbox[*sql.Tx]) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			db, err := openDB(cmd, a)
			if err != nil {
				return err
			}
			defer db.Close()
			return fn(cmd, args, outbox.New(db))
		}
	}
	var limit int
	dead := &cobra.Command{Use: "dead", Short: "List dead-lettered messages", Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if limit < 1 || limit > 100000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 100000", limit)}
			}
			return nil
		},
		RunE: withOutbox(reads, func(cmd *cobra.Command, _ []string, ob *outbox.Outbox[*sql.Tx]) error {
			ds, err := ob.Dead(cmd.Context(), limit)
			if err != nil {
				return err
			}
			for i := range ds {
				ds[i].LastError = redact.Text(ds[i].LastError)
			}
			if done, err := printJSON(cmd, nonNil(ds)); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTOPIC\tKEY\tATTEMPTS\tCREATED\tLAST ERROR")
			for _, d := range ds {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Topic, d.Key, d.Attempts, d.CreatedAt.UTC().Format(time.RFC3339), redact.Text(d.LastError))
			}
			return w.Flush()
		})}
	dead.Flags().IntVar(&limit, "limit", 100, "at most this many")
	cmd.AddCommand(
		&cobra.Command{Use: "stats", Short: "Pending, published and dead counts and the lag", Args: cobra.NoArgs,
			RunE: withOutbox(reads, func(cmd *cobra.Command, _ []string, ob *outbox.Outbox[*sql.Tx]) error {
				st, err := ob.Stats(cmd.Context())
				if err != nil {
					return err
				}
				if done, err := printJSON(cmd, map[string]any{"pending": st.Pending, "published": st.Published, "dead": st.Dead, "failing": st.Failing, "lag_seconds": st.Lag.Seconds()}); done || err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pending %d\npublished %d\ndead %d\nfailing %d\nlag %v\n", st.Pending, st.Published, st.Dead, st.Failing, st.Lag.Round(time.Millisecond))
				return nil
			})},
		dead,
		&cobra.Command{Use: "requeue ID|all", Short: "Make dead messages pending again",
			Args: func(cmd *cobra.Command, args []string) error {
				if err := cobra.ExactArgs(1)(cmd, args); err != nil {
					return err
				}
				_, err := requeueID(args[0])
				return err
			},
			RunE: withOutbox(writes, func(cmd *cobra.Command, args []string, ob *outbox.Outbox[*sql.Tx]) error {
				id, _ := requeueID(args[0])
				n, err := ob.Requeue(cmd.Context(), id)
				if err != nil {
					return err
				}
				if n == 0 && id != 0 { // nothing done: the error alone, no "requeued 0"
					return notFound(fmt.Errorf("outbox requeue: no dead message with id %d", id))
				}
				if done, err := printJSON(cmd, map[string]any{"requeued": n}); done || err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "requeued %d message(s)\n", n)
				return nil
			})},
	)
	return cmd
}

// requeueID is the message id of `outbox requeue ID`, 0 for all.
func requeueID(arg string) (int64, error) {
	if arg == "all" {
		return 0, nil
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || n <= 0 {
		return 0, usageError{fmt.Errorf("requeue: %q is not a message id or \"all\"", arg)}
	}
	return n, nil
}
