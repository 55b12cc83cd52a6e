package sqlcoord

// Version is this release of the library. The schema it needs is the
// newest of Versions(dialect); see CHANGELOG.md and docs/upgrading.md.
const Version = "1.2.0"
