module github.com/sqlcoord/sqlcoord/compat

go 1.26.0

// The previous release, served by scripts/compat-test.sh from a local
// proxy built from its recorded commit (RELEASES); this module is not in
// go.work, so it builds against that release, not this checkout.
require github.com/sqlcoord/sqlcoord v1.1.0
