#!/usr/bin/env bash
# pjdfstest bare and under guard on a part of the suite, for quick turns while fixing fidelity:
#
#   sudo tests/fidelity/pjdfstest.sh unlink rename/09.t     # paths under pjdfstest's tests/
#   sudo tests/fidelity/pjdfstest.sh                        # the whole suite (minutes per side)
#
# Runs the ignored comparison test (tests/it/pjdfstest.rs) on those paths and prints, per test
# file, the assertions that fail only under guard or only bare. The raw TAP output of both sides
# stays in target/tmp/fidelity/pjdfstest-*/. The suite comes from ../shared/external/pjdfstest,
# or from $GUARD_PJDFSTEST_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GUARD_PJDFSTEST_TESTS="$*"
exec cargo test --test it -- --ignored --exact --nocapture \
    pjdfstest::pjdfstest_fails_the_same_assertions_bare_and_under_guard
