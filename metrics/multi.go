package metrics

import "time"

// Multi records to each of rs (nil entries and Nop are skipped).
func Multi(rs ...Recorder) Recorder {
	var out multi
	for _, r := range rs {
		if r == nil {
			continue
		}
		if _, nop := r.(Nop); nop {
			continue
		}
		out = append(out, r)
	}
	switch len(out) {
	case 0:
		return Nop{}
	case 1:
		return out[0]
	}
	return out
}

type multi []Recorder

func (m multi) Call(op, dialect, outcome string, d time.Duration) {
	for _, r := range m {
		r.Call(op, dialect, outcome, d)
	}
}
func (m multi) TxnRetry(dialect, reason string) {
	for _, r := range m {
		r.TxnRetry(dialect, reason)
	}
}
func (m multi) TxnCommitUnknown(dialect, resolved string) {
	for _, r := range m {
		r.TxnCommitUnknown(dialect, resolved)
	}
}
func (m multi) LeaseRenewFailed(dialect string, lost bool) {
	for _, r := range m {
		r.LeaseRenewFailed(dialect, lost)
	}
}
func (m multi) JobRun(job, outcome string, fireToStart, d time.Duration) {
	for _, r := range m {
		r.JobRun(job, outcome, fireToStart, d)
	}
}
func (m multi) JobTakeover(job string) {
	for _, r := range m {
		r.JobTakeover(job)
	}
}
func (m multi) OutboxPublish(topic, outcome string, sinceCommit time.Duration) {
	for _, r := range m {
		r.OutboxPublish(topic, outcome, sinceCommit)
	}
}

func (m multi) Leadership(election string, term int64, leading bool) {
	for _, r := range m {
		r.Leadership(election, term, leading)
	}
}
