package dialects

import (
	"context"
	"time"
)

// Galera is MariaDB with wsrep_on (a Galera cluster where every node takes
// writes), detected by sqlcoord.Open and the Wrap constructors. It is
// MariaDB except where Galera differs:
//
//   - Row locks refuse with ErrGaleraLocks: SELECT … FOR UPDATE locks only
//     the local node, so holders on two nodes would overlap. Leases,
//     fences, keys, segments and job claims stay correct: their writes
//     touch one row, and certification lets exactly one of two conflicting
//     commits through (the other gets 1213, which sqlcoord retries where
//     the statement was autocommit, and txn.Do retries for transactions).
//   - Reads and updates are causal (wsrep_sync_wait=3, GaleraSyncWait):
//     a statement first waits until the node has applied everything the
//     cluster committed before it, so an UPDATE never misses a row just
//     written on another node (a segment tag, a lease). Open sets it;
//     a wrapped pool must (checked at Wrap, ErrDriverSetting otherwise).
//   - Open forces interpolateParams=true: with server-side prepared
//     statements MariaDB/wsrep was measured acknowledging COMMITs of
//     transactions that were never applied.
//
// GaleraSingleWriter is the same with row locks allowed, for clusters whose
// clients all write through one node (a proxy's single-writer mode). The
// promise is checked: sqlcoord.Open (and the Wrap constructors) hold a
// writer lease for the node they reach and refuse locks
// — ErrGaleraLocks naming the writer node — while another node holds it.
var Galera = newGalera("mariadb-galera", false)

// GaleraSyncWait is the wsrep_sync_wait sqlcoord needs on a multi-writer
// Galera cluster: 1 (reads) + 2 (updates and deletes).
const GaleraSyncWait = "3"

// GaleraSingleWriter: see Galera.
var GaleraSingleWriter = newGalera("mariadb-galera-single-writer", true)

func newGalera(name string, locks bool) *Dialect {
	d := newMySQL(name, mariaDBPatch, "(SELECT 0)")
	// No RETURNING here: an autocommit statement's RETURNING rows reach
	// the client before the commit is certified, so a lease grant that
	// loses certification on another node would still look won (two
	// holders of one token, TestGalera). The upsert, then a read after
	// the commit, tells the truth.
	d.q.LeaseAcquireReturning, d.q.FenceAdvanceReturning, d.q.JobClaimReturning = "", "", ""
	d.w.fenceLeaseReturning, d.w.acquireOwnReturning = "", ""
	d.parts = nil    // LOCK TABLES, which Partition needs, is not replicated
	d.keyParts = nil // untested on a cluster
	if !locks {
		d.ops = galeraOps{d.ops.(mysqlOps)}
	}
	return d
}

// GaleraNode names the node a connection reaches: wsrep_node_name, or
// host:port when that is empty.
const GaleraNode = `SELECT COALESCE(NULLIF(@@wsrep_node_name, ''), CONCAT(@@hostname, ':', @@port))`

// GaleraCatchUp returns once the node has applied every write set the
// cluster committed before it was sent (a causal read: wsrep_sync_wait
// for this one statement). The wait is the node's, not the connection's:
// any statement sent through that node afterwards sees those writes.
const GaleraCatchUp = `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1`

// galeraOps refuses row locks on a multi-writer Galera cluster.
type galeraOps struct{ mysqlOps }

func (galeraOps) LockTry(context.Context, Executor, string, *LockNames) error {
	return &Error{Kind: ErrGaleraLocks}
}

func (galeraOps) LockWait(context.Context, Executor, string, time.Duration, *LockNames) error {
	return &Error{Kind: ErrGaleraLocks}
}

// IsGalera reports whether a MySQL-family server is a Galera node with
// wsrep on (false on servers without wsrep, e.g. MySQL).
func IsGalera(ctx context.Context, e Executor) (bool, error) {
	rows, err := e.Query(ctx, `SHOW GLOBAL VARIABLES LIKE 'wsrep_on'`)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	on := false
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return false, err
		}
		on = v == "ON" || v == "1"
	}
	return on, rows.Err()
}
