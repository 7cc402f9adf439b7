#!/usr/bin/env bash
# Runs one GitHub Actions step under guard, for action.yml. Reads the action's inputs from
# INPUT_* variables, runs INPUT_RUN with INPUT_SHELL under the profiles in INPUT_PROFILE, then:
# one ::error annotation per refused call, a Markdown summary of refusals appended to
# $GITHUB_STEP_SUMMARY, the run's id, status and refusal count in $GITHUB_OUTPUT, and a
# directory (artifact-dir) holding the audit log, the summary and the report, for
# actions/upload-artifact. Exits with the command's status. Tested by tests/it/ci_kit.rs under
# a faked GitHub environment.
set -uo pipefail

: "${INPUT_RUN:?the action needs a run input}"
guard="${GUARD:-guard}"
workspace="${INPUT_WORKSPACE:-${GITHUB_WORKSPACE:-$PWD}}"
out="$(mktemp -d "${RUNNER_TEMP:-/tmp}/guard-XXXXXX")"

# The shell, as GitHub's own `shell:` keyword runs it.
case "${INPUT_SHELL:-bash}" in
  bash) shell=(bash --noprofile --norc -eo pipefail -c) ;;
  sh) shell=(sh -e -c) ;;
  *) echo "::error title=guard::shell must be bash or sh, not ${INPUT_SHELL}"; exit 1 ;;
esac

args=()
for p in ${INPUT_PROFILE:-ci}; do
  args+=(-p "$p")
done
if [ "${INPUT_ATOMIC:-false}" = "true" ]; then
  args+=(--atomic)
fi
if [ -n "${INPUT_AUDIT_OTLP:-}" ]; then
  args+=(--audit-otlp "$INPUT_AUDIT_OTLP")
fi

"$guard" exec "${args[@]}" -w "$workspace" \
  --audit-log "$out/audit.jsonl" --summary "$out/summary.json" \
  -- "${shell[@]}" "$INPUT_RUN"
status=$?

if [ -s "$out/audit.jsonl" ]; then
  # Annotations on stdout, the job summary and the step outputs.
  "$guard" report --format github "$out/audit.jsonl"
  "$guard" report --format markdown "$out/audit.jsonl" > "$out/report.md"
else
  echo "::error title=guard::guard could not start the command (exit status $status); see the step's log"
  echo "status=$status" >> "${GITHUB_OUTPUT:-/dev/null}"
fi
echo "artifact-dir=$out" >> "${GITHUB_OUTPUT:-/dev/null}"
exit "$status"
