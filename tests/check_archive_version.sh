#!/usr/bin/env bash
# check_archive_version.sh SOURCE_DIR — a build from a `git archive` source tarball (no .git)
# still records its commit: the archive of HEAD, extracted outside any repository, gives the
# version header HEAD's commit (cmake/archive-commit.txt, export-subst in .gitattributes), not
# "unknown". Exit 77 when SOURCE_DIR is not a git checkout (nothing to archive).
set -uo pipefail
source_dir=${1:?usage: check_archive_version.sh SOURCE_DIR}
if ! expected=$(git -C "$source_dir" rev-parse --short=12 HEAD 2> /dev/null); then
  echo "SKIPPED: $source_dir is not a git checkout"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$source_dir" archive --format=tar HEAD | tar -x -C "$work" || exit 1
[ ! -e "$work/.git" ] || { echo "FAIL: the archive holds .git"; exit 1; }
cmake -DINPUT="$work/harness/cli/version.h.in" -DOUTPUT="$work/version.h" \
  -DSOURCE_DIR="$work" -DPROJECT_VERSION=0 -P "$work/cmake/GitVersion.cmake" || exit 1
if ! grep -q "CPPARITY_GIT_COMMIT \"$expected\"" "$work/version.h"; then
  echo "FAIL: the version header of an archived HEAD says"
  grep CPPARITY_GIT_COMMIT "$work/version.h"
  echo "expected commit $expected"
  exit 1
fi
echo "archived HEAD records commit $expected"
