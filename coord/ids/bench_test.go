package ids_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// go test -bench . -run ^$ ./coord/ids/  (benchstat-friendly)

func BenchmarkSnowflake(b *testing.B) {
	sf, _ := ids.NewSnowflake(1, 0, ids.SnowflakeOptions{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sf.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkUUIDv7(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ids.NewUUIDv7()
		}
	})
}

// BenchmarkUUIDv7GooglePool is google/uuid's NewV7 with its own rand pool
// (a process-wide switch a library must not flip; set here, in a test
// binary of its own, for the comparison). Run alone:
// go test -run '^$' -bench 'UUIDv7' -count 5 ./coord/ids/
func BenchmarkUUIDv7GooglePool(b *testing.B) {
	uuid.EnableRandPool()
	defer uuid.DisableRandPool()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			uuid.NewV7()
		}
	})
}

func BenchmarkUUIDv7Google(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			uuid.NewV7()
		}
	})
}

func BenchmarkUUIDv4(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			uuid.New()
		}
	})
}

func BenchmarkSegment(b *testing.B) {
	env := dbtest.New(b, "postgres")
	seg, _ := ids.NewSegments(env.DB, "bench", ids.SegmentOptions{Step: 10000, AutoCreate: true})
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := seg.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
