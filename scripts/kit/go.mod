// A module outside sqlcoord's, as a user's is: scripts/install-test.sh
// copies kit_test.go into an empty module, requires sqlcoord from a proxy
// holding this checkout as a release, and runs it. Not in go.work.
module example.com/sqlcoordkit

go 1.26.0

require github.com/sqlcoord/sqlcoord v1.2.0
