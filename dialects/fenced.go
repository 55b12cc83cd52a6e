package dialects

import (
	"fmt"
	"strings"
)

// FencedRow describes a fenced write to a caller's own table:
//
//	UPDATE Table SET FenceColumn = Token, Columns[0] = Values[0], ...
//	 WHERE KeyColumn = Key AND FenceColumn <= Token
//
// Every identifier is validated and quoted by QuoteIdent. The update also
// refuses a token issued before the current failover epoch began and, with
// HWM above 0, a stale primary (see Queries.FenceAdvanceChecked).
type FencedRow struct {
	Table, KeyColumn, FenceColumn string
	Columns                       []string
	Values                        []any
	Token                         int64
	Key                           any
	HWM                           int64
}

// FencedUpdate builds the statement of r (with r.HWM 0); the returned
// args are in placeholder order. The statement affects no row when the
// row's fence is newer than the token (or the row does not exist).
func (d *Dialect) FencedUpdate(r FencedRow) (string, []any, error) {
	r.HWM = 0
	q, _, args, err := d.fencedStatements(r)
	return q, args, err
}

// fencedStatements builds the fenced update and, from the same validated
// identifiers, a locking read of the row's fence (args: key), which
// MySQL needs when the update reports no row changed.
func (d *Dialect) fencedStatements(r FencedRow) (update, check string, args []any, err error) {
	if len(r.Columns) != len(r.Values) {
		return "", "", nil, fmt.Errorf("sqlcoord: %d columns but %d values", len(r.Columns), len(r.Values))
	}
	t, err := d.QuoteIdent(r.Table)
	if err != nil {
		return "", "", nil, err
	}
	k, err := d.quoteColumn(r.KeyColumn)
	if err != nil {
		return "", "", nil, err
	}
	f, err := d.quoteColumn(r.FenceColumn)
	if err != nil {
		return "", "", nil, err
	}
	var b strings.Builder
	args = make([]any, 0, len(r.Values)+3)
	fmt.Fprintf(&b, "%s UPDATE %s SET %s = %s", MarkFence, t, f, d.Placeholder(1))
	args = append(args, r.Token)
	for i, c := range r.Columns {
		qc, err := d.quoteColumn(c)
		if err != nil {
			return "", "", nil, err
		}
		if qc == f || qc == k {
			return "", "", nil, fmt.Errorf("%w %q: the key and fence columns cannot be set", ErrInvalidIdent, c)
		}
		fmt.Fprintf(&b, ", %s = %s", qc, d.Placeholder(len(args)+1))
		args = append(args, r.Values[i])
	}
	fmt.Fprintf(&b, " WHERE %s = %s", k, d.Placeholder(len(args)+1))
	args = append(args, r.Key)
	fmt.Fprintf(&b, " AND %s <= %s", f, d.Placeholder(len(args)+1))
	args = append(args, r.Token)
	if d.tokenCheck != nil {
		fmt.Fprintf(&b, " AND %s", d.tokenCheck(d.Placeholder(len(args)+2), d.Placeholder(len(args)+1)))
		args = append(args, r.HWM, r.Token)
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
