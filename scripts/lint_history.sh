#!/usr/bin/env bash
# Tracked files describe the project as it is: no work-session numbers, issue numbers or names of
# the people who worked on it. History lives in git and CHANGELOG.md (which cites versions and
# commits). Prints file:line for every hit and fails; silent and exit 0 when clean.
set -euo pipefail
cd "$(dirname "$0")/.."

# Case-insensitive, extended regex. This file names the patterns, so it is the one exception.
PATTERN="session [0-9]|\bengineer|issue [0-9]|\bh[0-9]+'s"

if hits=$(git grep -n -I -i -E "$PATTERN" -- . ':(exclude)scripts/lint_history.sh'); then
    echo "history words in tracked files (say what the code does now; history goes to git):" >&2
    echo "$hits" >&2
    exit 1
fi
