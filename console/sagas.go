package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/saga"
)

// sagasData is the global transactions page: counts, the live and stuck
// ones, the latest ended.
type sagasData struct {
	Counts      map[string]int64
	Live, Ended []saga.Info
}

func (c *Console) sagas(ctx context.Context, _ *http.Request, _ time.Time) (string, any, error) {
	var d sagasData
	var err error
	if d.Counts, err = saga.Counts(ctx, c.db); err != nil {
		return "Sagas & TCC", nil, err
	}
	if d.Live, err = saga.List(ctx, c.db, saga.Live, c.opt.Limit); err != nil {
		return "Sagas & TCC", nil, err
	}
	if d.Ended, err = saga.List(ctx, c.db, saga.Ended, 20); err != nil {
		return "Sagas & TCC", nil, err
	}
	for _, l := range [][]saga.Info{d.Live, d.Ended} {
		for i := range l {
			l[i].Reason, l[i].LastErr = redact.Text(l[i].Reason), redact.Text(l[i].LastErr)
			if strings.Contains(l[i].Reason, l[i].LastErr) {
				l[i].LastErr = "" // the reason says it already
			}
		}
	}
	return "Sagas & TCC", d, nil
}

// gidParam reads and checks the gid of a saga page or action.
func gidParam(gid string) (string, error) {
	if err := valid.Text("gid", gid, 128); err != nil {
		return "", errs.Errorf("%w: %w", ErrInvalid, err)
	}
	return gid, nil
}

func (c *Console) sagaInfo(ctx context.Context, gid string) (saga.Info, error) {
	in, err := saga.Get(ctx, c.db, gid)
	switch {
	case errors.Is(err, saga.ErrNotFound):
		return in, notFound{err}
	case errors.Is(err, saga.ErrInvalid):
		return in, errs.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return in, err
	}
	in.Reason, in.LastErr = redact.Text(in.Reason), redact.Text(in.LastErr)
	for i := range in.Branches {
		in.Branches[i].LastErr = redact.Text(in.Branches[i].LastErr)
	}
	return in, nil
}

func (c *Console) sagaPage(ctx context.Context, r *http.Request, _ time.Time) (string, any, error) {
	gid, err := gidParam(r.URL.Query().Get("gid"))
	if err != nil {
		return "Global transaction", nil, err
	}
	in, err := c.sagaInfo(ctx, gid)
	return "Global transaction " + gid, in, err
}

func (c *Console) confirmSaga(op string) func(ctx context.Context, r *http.Request, _ time.Time) (string, any, error) {
	return func(ctx context.Context, r *http.Request, _ time.Time) (string, any, error) {
		title := map[string]string{"retry": "Retry", "resolve": "Resolve"}[op]
		gid, err := gidParam(r.URL.Query().Get("gid"))
		if err != nil {
			return title, nil, err
		}
		in, err := c.sagaInfo(ctx, gid)
		if err != nil {
			return title, nil, err
		}
		if !in.Stuck {
			return title, nil, errs.Errorf("%w: %s is not stuck (%s)", ErrInvalid, gid, in.Status)
		}
		cf := confirmation{Action: "/action/saga-" + op, Back: "/saga?gid=" + url.QueryEscape(gid), Fields: [][2]string{{"gid", gid}},
			Details: [][2]string{{"gid", gid}, {"mode", string(in.Mode)}, {"status", string(in.Status) + " (stuck)"},
				{"step", fmt.Sprintf("%d of %d", in.Step+1, len(in.Branches))}, {"reason", in.Reason}, {"last error", in.LastErr}}}
		if op == "retry" {
			cf.Question = fmt.Sprintf("Retry %s? A driver calls its current step again, with a fresh count of tries.", gid)
		} else {
			cf.Question = fmt.Sprintf("Resolve %s by hand? No driver will touch it again: its remaining steps must have been done (or made moot) by a person.", gid)
			cf.Input = &input{Name: "reason", Label: "What was done (recorded with the transaction)"}
		}
		return title, cf, nil
	}
}

func (c *Console) doSaga(op string) func(ctx context.Context, r *http.Request) (string, string, error) {
	return func(ctx context.Context, r *http.Request) (string, string, error) {
		gid, err := gidParam(r.PostForm.Get("gid"))
		if err != nil {
			return "", "", err
		}
		if op == "retry" {
			err = saga.Retry(ctx, c.db, gid)
		} else {
			reason := strings.TrimSpace(r.PostForm.Get("reason"))
			if reason == "" {
				return "", "", errs.Errorf("%w: say what was done by hand", ErrInvalid)
			}
			err = saga.Resolve(ctx, c.db, gid, "console: "+reason)
		}
		if errors.Is(err, saga.ErrInvalid) || errors.Is(err, saga.ErrNotStuck) || errors.Is(err, saga.ErrNotFound) {
			err = errs.Errorf("%w: %w", ErrInvalid, err)
		}
		if err != nil {
			return "", "", err
		}
		done := map[string]string{"retry": "made " + gid + " due again", "resolve": "resolved " + gid}[op]
		return "/saga?gid=" + url.QueryEscape(gid), done, nil
	}
}
