#!/bin/sh
# The tree as committed: no unfinished merge in any tracked file. A line
# that is exactly "<<<<<<< ", "=======" or ">>>>>>> " (with what follows) is
# what git leaves in a file whose conflict nobody resolved; docs/AGENT.md
# once went out with two versions of a paragraph that way.
set -u
cd "${RDZV_SOURCE_ROOT:-$(dirname "$0")/..}" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files)
else
	files=$(find . -path ./build\* -prune -o -type f -print)
fi
found=$(printf '%s\n' "$files" | grep -v '\.patch$' |
    tr '\n' '\0' | xargs -0 grep -nIE '^(<<<<<<<|>>>>>>>)( |$)|^=======$' 2>/dev/null |
    grep -E ':(<<<<<<<|>>>>>>>)( |$)' )
if [ -n "$found" ]; then
	echo "merge-conflict markers in tracked files (resolve the merge):"
	printf '%s\n' "$found"
	exit 1
fi
echo "no merge-conflict markers in $(printf '%s\n' "$files" | wc -l) files"
