package dialect

import (
	"fmt"
	"strings"
)

// FencedUpdate builds the statement that fences a write to a caller's own
// table:
//
//	UPDATE table SET fenceCol = token, set1 = v1, ... WHERE keyCol = key AND fenceCol <= token
//
// Every identifier is validated and quoted by QuoteIdent. The returned args
// are in placeholder order. The statement affects no row when the row's
// fence is newer than token (or the row does not exist).
func (d *Dialect) FencedUpdate(table, keyCol, fenceCol string, setCols []string, token int64, key any, vals []any) (string, []any, error) {
	q, _, args, err := d.fencedStatements(table, keyCol, fenceCol, setCols, token, key, vals, 0)
	return q, args, err
}

// fencedStatements builds the fenced update and, from the same validated
// identifiers, a locking read of the row's fence (args: key), which
// MySQL needs when the update reports no row changed.
// With a high-water mark hwm above 0 the update also refuses a stale
// primary (see Queries.FenceAdvanceChecked).
func (d *Dialect) fencedStatements(table, keyCol, fenceCol string, setCols []string, token int64, key any, vals []any, hwm int64) (update, check string, args []any, err error) {
	if len(setCols) != len(vals) {
		return "", "", nil, fmt.Errorf("sqlcoord: %d columns but %d values", len(setCols), len(vals))
	}
	t, err := d.QuoteIdent(table)
	if err != nil {
		return "", "", nil, err
	}
	k, err := d.quoteColumn(keyCol)
	if err != nil {
		return "", "", nil, err
	}
	f, err := d.quoteColumn(fenceCol)
	if err != nil {
		return "", "", nil, err
	}
	var b strings.Builder
	args = make([]any, 0, len(vals)+3)
	fmt.Fprintf(&b, "UPDATE %s SET %s = %s", t, f, d.Placeholder(1))
	args = append(args, token)
	for i, c := range setCols {
		qc, err := d.quoteColumn(c)
		if err != nil {
			return "", "", nil, err
		}
		if qc == f || qc == k {
			return "", "", nil, fmt.Errorf("%w %q: the key and fence columns cannot be set", ErrInvalidIdent, c)
		}
		fmt.Fprintf(&b, ", %s = %s", qc, d.Placeholder(len(args)+1))
		args = append(args, vals[i])
	}
	fmt.Fprintf(&b, " WHERE %s = %s", k, d.Placeholder(len(args)+1))
	args = append(args, key)
	fmt.Fprintf(&b, " AND %s <= %s", f, d.Placeholder(len(args)+1))
	args = append(args, token)
	if hwm > 0 && d.epochCheck != nil {
		fmt.Fprintf(&b, " AND %s", d.epochCheck(d.Placeholder(len(args)+1)))
		args = append(args, hwm)
	}
	check = fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s FOR UPDATE", f, t, k, d.Placeholder(1))
	return b.String(), check, args, nil
}

func (d *Dialect) quoteColumn(name string) (string, error) {
	if strings.Contains(name, ".") {
		return "", fmt.Errorf("%w %q: a column name has no dot", ErrInvalidIdent, name)
	}
	return d.QuoteIdent(name)
}
