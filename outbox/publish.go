package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// Publisher sends one message to a broker and returns once the broker
// acknowledged it. An error wrapped with Permanent dead-letters the
// message at once; any other error is retried with backoff.
//
// A relay calls Publish from several goroutines at once — one per topic of
// a batch, at most RelayOptions.PublishConcurrency — so a Publisher must be
// safe for concurrent use (this package's are), or run with
// PublishConcurrency: 1. Messages of one topic are never published
// concurrently.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
}

// PublisherFunc adapts a function.
type PublisherFunc func(ctx context.Context, m Message) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, m Message) error { return f(ctx, m) }

type permanent struct{ err error }

func (p permanent) Error() string { return "permanent: " + p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying (the message is dead-lettered).
func Permanent(err error) error { return permanent{err} }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// WriterPublisher writes one line per message (for demos and debugging).
type WriterPublisher struct{ W io.Writer }

// writerMu keeps WriterPublishers' lines whole when topics are published
// concurrently (and their writers safe: a bytes.Buffer is not).
var writerMu sync.Mutex

// Publish writes the message.
func (p WriterPublisher) Publish(_ context.Context, m Message) error {
	writerMu.Lock()
	defer writerMu.Unlock()
	_, err := fmt.Fprintf(p.W, "%s topic=%s key=%s attempt=%d payload=%s\n", m.MessageID(), m.Topic, m.Key, m.Attempt, m.Payload)
	return err
}

// HTTPPublisher POSTs each message to URL with the outbox id as the
// Idempotency-Key header. 2xx is success; 429 and 5xx are retried; other
// 4xx responses dead-letter the message.
type HTTPPublisher struct {
	URL    string
	Client *http.Client // default: 10s timeout
}

// Publish posts the message.
func (p HTTPPublisher) Publish(ctx context.Context, m Message) error {
	c := p.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return Permanent(fmt.Errorf("outbox: webhook URL %s: invalid", redact.URL(p.URL)))
	}
	// Credentials in the URL go in the Authorization header, never in
	// the request line, so that no error (stored in last_error, logged)
	// can carry them.
	user := u.User
	u.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Payload))
	if err != nil {
		return Permanent(fmt.Errorf("outbox: webhook %s: %s", redact.URL(p.URL), redact.Text(err.Error())))
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	for k, v := range m.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", m.MessageID())
	req.Header.Set("X-Outbox-Topic", m.Topic)
	if m.Key != "" {
		req.Header.Set("X-Outbox-Key", m.Key)
	}
	req.Header.Set("X-Outbox-Attempt", strconv.Itoa(m.Attempt))
	resp, err := c.Do(req)
	if err != nil {
		return errors.New(redact.Text(err.Error()))
	}
	head := make([]byte, maxBodyInError)
	n, _ := io.ReadFull(resp.Body, head)
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("outbox: webhook %s: %s%s", redact.URL(p.URL), resp.Status, redact.Body(head[:n], maxBodyInError, p.URL))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return err
	}
	return Permanent(err)
}

// maxBodyInError bounds how much of a refusing webhook's response body
// its error (and so last_error, the logs and the console) carries.
const maxBodyInError = 512
