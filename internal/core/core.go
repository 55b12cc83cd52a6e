// Package core is the machinery sqlcoord's application stacks share — the
// root package's database/sql pool, pgxv5, sqlxdriver — without importing
// any database driver: options, the one connection check every Open and
// Wrap runs, the database/sql executor, the failover-epoch high-water
// mark, the Galera writer lease, and the hooks a driver package fills in
// (pgxv5 for pgx's database/sql driver).
package core

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/metrics"
	sqlschema "github.com/sqlcoord/sqlcoord/sql"
)

// Options mirrors sqlcoord.Options field for field (the root package
// converts one into the other; a field added to one and not the other is
// a compile error there). See sqlcoord.Options for what each does.
type Options struct {
	MaxOpenConns           int
	MaxIdleConns           int
	ConnMaxLifetime        time.Duration
	ConnMaxIdleTime        time.Duration
	Dialect                string
	Pooler                 bool
	AllowReadOnly          bool
	RequireSyncReplication bool
	GaleraSingleWriter     bool
	EpochFile              string
	Metrics                metrics.Recorder
	TracerProvider         trace.TracerProvider
	CleanupDuty            float64
	CleanupRate            float64
}

// ValidCleanupPace checks Options.CleanupDuty (0, no pause, up to 1) and
// Options.CleanupRate (rows per second, 0: no cap; finite).
func ValidCleanupPace(duty, rate float64) error {
	if !(duty >= 0 && duty <= 1) { // NaN too
		return errs.Errorf("%w: CleanupDuty %v is not between 0 and 1", dialects.ErrInvalidOptions, duty)
	}
	if !(rate >= 0 && rate <= math.MaxFloat64) { // NaN and +Inf too
		return errs.Errorf("%w: CleanupRate %v is not a number of rows per second ≥ 0", dialects.ErrInvalidOptions, rate)
	}
	return nil
}

// TracerName is the instrumentation scope of sqlcoord's spans.
const TracerName = "github.com/sqlcoord/sqlcoord"

// Tracer is tp's tracer, or nil when tp is nil (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// DirtyError is ErrDirty for a schema left dirty at version v (by
// cause, when known), naming the commands that repair it.
func DirtyError(family string, v uint, cause error) error {
	prev := uint(0)
	if all, err := sqlschema.Versions(family); err == nil {
		for _, x := range all {
			if x < v {
				prev = x
			}
		}
	}
	why := ""
	if cause != nil {
		why = " (" + cause.Error() + ")"
	}
	return errs.Errorf("%w at version %d: migration %d failed part-way%s; repair the coord_ tables by hand, then run `sqlcoord migrate force %d` if you completed migration %d, or `sqlcoord migrate force %d` if you undid it", &dirty{cause}, v, v, why, v, v, prev)
}

// dirty is ErrDirty that also unwraps to the failure behind it.
type dirty struct{ cause error }

func (d *dirty) Error() string   { return dialects.ErrDirty.Error() }
func (d *dirty) Unwrap() []error { return []error{dialects.ErrDirty, d.cause} }
