package saga

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/propagation"

	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/txn"
)

// The HTTP protocol between drivers and participants. Every operation of
// a branch is a POST to the branch's URL with the payload as the body and
// these headers; the participant answers 2xx for success, 409 Conflict
// for a business failure (the body says why), anything else (or no
// answer within CallTimeout) to be called again.
const (
	HeaderGID     = "Sqlcoord-Gid"
	HeaderBranch  = "Sqlcoord-Branch"
	HeaderOp      = "Sqlcoord-Op"
	HeaderAttempt = "Sqlcoord-Attempt"
)

// maxAnswer bounds what is read of a participant's answer.
const maxAnswer = 512

// NewRequest is the POST a driver sends to an HTTP branch for call c —
// for a client that calls a participant itself (a test, a benchmark, a
// tool), in the same protocol.
func NewRequest(ctx context.Context, url string, c Call) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(c.Payload))
	if err != nil {
		return nil, fmt.Errorf("saga: %s: %w", safeTarget(url), err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(HeaderGID, c.GID)
	req.Header.Set(HeaderBranch, c.Branch)
	req.Header.Set(HeaderOp, string(c.Op))
	req.Header.Set(HeaderAttempt, strconv.FormatInt(c.Attempt, 10))
	// The same key for every call of one operation: a participant can use
	// a generic idempotency layer instead of the barrier.
	req.Header.Set("Idempotency-Key", c.GID+"/"+c.Branch+"/"+string(c.Op))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return req, nil
}

func (c *Coordinator[TTx]) callHTTP(ctx context.Context, target string, call Call) error {
	return Invoke(ctx, c.opts.HTTPClient, target, call)
}

// Invoke makes call on the HTTP participant at url as a driver does: nil
// for a 2xx answer, an error made by Fail for 409 Conflict (a business
// failure, with the participant's reason), any other error to be called
// again. Errors name the URL without its query string. For a client that
// calls a participant itself (a test, a benchmark, a tool).
func Invoke(ctx context.Context, client *http.Client, url string, call Call) error {
	req, err := NewRequest(ctx, url, call)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error names the URL: say it without its query string.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		return fmt.Errorf("saga: POST %s: %w", safeTarget(url), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("saga: POST %s: HTTP %d%s", safeTarget(url), resp.StatusCode, redact.Body(body, maxAnswer))
	if resp.StatusCode == http.StatusConflict {
		return Fail(err)
	}
	return err
}

// Request reads a Call from a driver's request; ErrInvalid when it is not
// one.
func Request(r *http.Request) (Call, error) {
	c := Call{GID: r.Header.Get(HeaderGID), Branch: r.Header.Get(HeaderBranch), Op: txn.Op(r.Header.Get(HeaderOp))}
	if r.Method != http.MethodPost {
		return c, fmt.Errorf("%w: method %s (want POST)", ErrInvalid, r.Method)
	}
	if c.GID == "" || c.Branch == "" || !validOp(c.Op) {
		return c, fmt.Errorf("%w: missing or invalid %s, %s or %s header", ErrInvalid, HeaderGID, HeaderBranch, HeaderOp)
	}
	c.Attempt, _ = strconv.ParseInt(r.Header.Get(HeaderAttempt), 10, 64)
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayload+1))
	if err != nil {
		return c, fmt.Errorf("saga: reading the payload: %w", err)
	}
	if len(body) > MaxPayload {
		return c, fmt.Errorf("%w: payload over %d bytes", ErrInvalid, MaxPayload)
	}
	c.Payload = body
	return c, nil
}

// Handler is a participant's endpoint for one branch service: each call
// runs fn in its own transaction of the barrier's database together with
// the barrier row, so a repeated, late or out-of-order call is harmless
// (see txn.Barrier). fn returning an error made by Fail answers 409 (a
// business failure); any other error 500 (called again); success, or a
// call the barrier skips, 200. fn sees Call.Op to tell the operations
// apart.
func Handler[TTx any](b *txn.Barrier[TTx], fn func(ctx context.Context, tx TTx, c Call) error) http.Handler {
	run := BarrierFunc(b, fn)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Request(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		switch err := run(ctx, c); {
		case err == nil:
			w.WriteHeader(http.StatusOK)
		case errors.Is(err, ErrBusiness):
			var be *businessError
			errors.As(err, &be)
			http.Error(w, redact.Text(be.err.Error()), http.StatusConflict) // the participant's reason
		case errors.Is(err, txn.ErrInvalidBranch):
			http.Error(w, redact.Text(err.Error()), http.StatusBadRequest) // a gid or branch the barrier refuses
		default:
			http.Error(w, "branch failed; call again", http.StatusInternalServerError)
		}
	})
}
