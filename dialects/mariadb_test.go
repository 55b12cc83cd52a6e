package dialects

import (
	"strings"
	"testing"
)

// MariaDB's counter statements select the failover epoch's row of
// coord_forks directly (mariaDBDirect), and Acquire returns the base it
// read: a base statement edited into another shape would silently fall
// back to the slower form, so each rewrite is checked here.
func TestMariaDBStatementsReadTheEpochDirectly(t *testing.T) {
	derived := "(SELECT " + mysqlEpoch + " AS b) e"
	for name, q := range map[string]string{
		"LeaseAcquireReturning": MariaDB.Q().LeaseAcquireReturning,
		"FenceAdvanceReturning": MariaDB.Q().FenceAdvanceReturning,
		"JobClaimReturning":     MariaDB.Q().JobClaimReturning,
	} {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(q, derived) || strings.Contains(q, "e.b") || !strings.Contains(q, "FROM coord_forks f WHERE f.server_id = @@server_id") {
				t.Fatalf("not the direct form:\n%s", q)
			}
		})
	}
	t.Run("Acquire returns the base it read, once", func(t *testing.T) {
		q := MariaDB.Q().LeaseAcquireReturning
		if strings.Count(q, "@sqlcoord_epoch := f.base") != 1 || !strings.HasSuffix(q, "RETURNING owner, token, expires_at, @sqlcoord_epoch, expires_at <= UTC_TIMESTAMP(6)") {
			t.Fatalf("epoch not carried to RETURNING:\n%s", q)
		}
	})
	t.Run("MySQL 8 and Galera keep their own forms", func(t *testing.T) {
		if MySQL.Q().LeaseAcquireReturning != "" || Galera.Q().LeaseAcquireReturning != "" {
			t.Fatal("a dialect without RETURNING got a RETURNING statement")
		}
	})
}
