#!/usr/bin/env bash
# Records a release: scripts/release.sh VERSION (e.g. 1.2.0), on a clean
# checkout of the commit to release, after `make test` passed on it.
# It checks that sqlcoord.Version, every module's requirement on the
# others and the CHANGELOG's heading name VERSION, appends
# "VERSION COMMIT DATE" to RELEASES, commits that, and tags the release
# commit v<VERSION> and each nested module's <dir>/v<VERSION> (the tags Go
# resolves `go install …@vVERSION` with). Push the commit and the tags
# yourself. See docs/releasing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:?usage: scripts/release.sh VERSION}
v=${v#v}
if [ -n "$(git status --porcelain)" ]; then
  echo "release: the checkout has uncommitted changes" >&2; exit 1
fi
grep -q "const Version = \"$v\"" version.go || { echo "release: version.go does not say $v" >&2; exit 1; }
grep -q "^## $v " CHANGELOG.md || { echo "release: CHANGELOG.md has no '## $v' heading" >&2; exit 1; }
bad=$(grep -rn 'github.com/sqlcoord/sqlcoord[a-z/]* v' $(git ls-files '*go.mod') | grep -v " v$v" || true)
if [ -n "$bad" ]; then
  echo "release: modules that do not require each other at v$v:"; echo "$bad"; exit 1
fi
if grep -q "^$v " RELEASES; then
  echo "release: $v is already in RELEASES" >&2; exit 1
fi
commit=$(git rev-parse HEAD)
echo "$v $commit $(date -u +%F)" >> RELEASES
git add RELEASES
git commit -q -m "Release $v ($commit)"
git tag "v$v" "$commit"
for m in $(git ls-files '*go.mod' | xargs -n1 dirname | grep -v '^\.$'); do
  git tag "$m/v$v" "$commit"
done
echo "release: $v is $commit; tagged v$v and the nested modules. Push: git push && git push --tags"
