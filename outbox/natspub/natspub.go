// Package natspub publishes outbox messages to NATS JetStream. It is a
// package of its own so that importing outbox does not pull NATS.
package natspub

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/outbox"
)

var _ outbox.Publisher = (*Publisher)(nil)

// Publisher publishes to NATS JetStream, subject = topic, with the
// outbox id as Nats-Msg-Id so the stream's duplicate window drops a message
// that a crashed relay published twice. The stream must exist.
type Publisher struct {
	JS jetstream.JetStream
}

// New connects to url and returns a publisher and a close
// function.
func New(url string) (*Publisher, func(), error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, fmt.Errorf("natspub: %s: %s", redact.URL(url), redact.Text(err.Error(), url))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return &Publisher{JS: js}, nc.Close, nil
}

// Publish sends the message and waits for the stream's ack.
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	msg := nats.NewMsg(m.Topic)
	msg.Data = m.Payload
	for k, v := range m.Headers {
		msg.Header.Set(k, v)
	}
	if m.Key != "" {
		msg.Header.Set("Outbox-Key", m.Key)
	}
	_, err := p.JS.PublishMsg(ctx, msg, jetstream.WithMsgID(m.MessageID()))
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("outbox: no JetStream stream for subject %q: %w", m.Topic, err)
	}
	return err
}
