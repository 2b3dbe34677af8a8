#!/usr/bin/env bash
# check_tables.sh: keeps the dtype and op tables the one place that lists dtypes and ops
# (core/include/dtype_table.h, core/include/op_table.h; docs/c-api.md). Everything else
# derives its lists from them (X-macro walks in C, td_dtype_name / td_op_name loops in
# Lua), so this fails on a list written by hand in the C, CUDA, MPI or Lua sources:
#   dtype-cases  2 or more `case TD_<dtype>:` labels within 12 lines: a switch by hand;
#   dtype-codes  3 or more dtype codes (TD_FLOAT32, Lua's C.TD_FLOAT32) within 3 lines as
#                list items, designated indices ([TD_INT8] =) or == / != tests: an
#                array, an alias table, a chain of tests (arguments and ?: are not lists);
#   dtype-array  an array of TD_NUM_DTYPES initialised otherwise than by a table walk;
#   dtype-names  3 or more dtype names on one line: in C strings ("float32",
#                "torch.int64, ..." in a message), anywhere in Lua code (uint8 = "u8");
#   op-names     3 or more op names as strings ("add", 'sum', "exp_") within 3 lines, or
#                as words in one C string (a list in a message);
#   op-codes     2 or more `name = C.TD_<op code>` pairs within 3 lines (a Lua name table);
#   op-bounds    an op enum's last code as a bound (TD_UNARY_ISINF + 1, <= TD_RED_...):
#                TD_*_COUNT says it.
# The names and codes are read from the tables themselves, so the check follows them.
# Comments are not code (prose may list dtypes); tests/ enumerate on purpose and are not
# read. A place that must stay a list is allowed below, with its reason.
#
# Usage: check_tables.sh [ROOT]  (ROOT: the tree to read, default this one; the tables
# always come from this one, so an older tree can be counted against them).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "${1:-$here}" && pwd)"

# file:rule  reason (the reasons are for readers; the check reads the first field)
allowed=$(cat <<'EOF'
core/kernels/promote.c:dtype-codes  torch's promoteTypes table and its short dtype names, kept as torch writes them
core/kernels/promote.c:dtype-array  the same table, to read against torch's source: a new dtype adds a row and a column
plugins/physics.lua:dtype-names  a plugin sees only the public Lua API, which has no floating-dtype query yet (issue 26, part 5: the plugin kit)
plugins/physics.lua:op-names  its own options for reducing a time axis (mean, first, last, min, max), not the op table's ops
lua/tensordict/host/metrics.lua:op-names  the stats a recipe's metrics block names (mean, std, min, max, sum, count, nan_count): the recipe's words, each mapped to a reduction, not the op table's ops
lua/tensordict/tensor/method_forms.lua:op-names  torch's other spellings (NumPy's names) mapped to the op each calls: a list of aliases, not of ops
lua/tensordict/flow/expr_ops.lua:op-names  the expression language's operator symbols (+, //, <=, and) mapped to the op each calls: syntax, not a list of ops (its functions are read from the op table)
lua/tensordict/tensor/leaf_stats.lua:op-names  the column headings of T.describe's table (count, mean, std, min, max, ...), pandas' describe() names, not ops
EOF
)

dtable="$here/core/include/dtype_table.h"
otable="$here/core/include/op_table.h"
# Dtype rows: X(__VA_ARGS__, SUFFIX, stored, kind, compute, family, "name", ...
dtype_codes=$(grep -oE 'X\(__VA_ARGS__, [A-Z0-9_]+,' "$dtable" | sed -E 's/.*, ([A-Z0-9_]+),/TD_\1/' | tr '\n' ' ')
dtype_names=$(grep -oE 'X\(__VA_ARGS__, [A-Z0-9_]+, [a-z0-9_]+, [A-Z]+, [a-z0-9_]+, [A-Z0-9]+, "[a-z0-9_]+"' "$dtable" |
              sed -E 's/.*"([a-z0-9_]+)"$/\1/' | tr '\n' ' ')
# Op rows, table by table: the names, and each enum's last code.
op_names=$(grep -oE 'X\(__VA_ARGS__, [A-Z0-9_]+, "[a-z0-9_]+"' "$otable" | sed -E 's/.*"([a-z0-9_]+)"$/\1/' | tr '\n' ' ')
op_last=$(awk '/#define TD_BINARY_OPS/ { p = "TD_BINARY_" } /#define TD_UNARY_OPS/ { p = "TD_UNARY_" }
               /#define TD_REDUCE_OPS/ { p = "TD_RED_" }
               p && match($0, /X\(__VA_ARGS__, [A-Z0-9_]+,/) {
                 s = substr($0, RSTART, RLENGTH); sub(/.*, /, "", s); sub(/,$/, "", s); last[p] = p s }
               END { for (k in last) printf "%s ", last[k] }' "$otable")
for v in dtype_codes dtype_names op_names op_last; do
  if [ -z "${!v// /}" ]; then echo "check_tables: could not read $v from the tables" >&2; exit 2; fi
done

cd "$root"
files=$(find core lua plugins scripts -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.lua' \) \
          ! -path core/include/dtype_table.h ! -path core/include/op_table.h \
          ! -path core/include/tensordict.h ! -name 'cdefs*.lua' ! -name 'cuda_cdefs.lua' | sort)

# shellcheck disable=SC2086
found=$(awk -v DCODES="$dtype_codes" -v DNAMES="$dtype_names" -v ONAMES="$op_names" -v OLAST="$op_last" '
function set_of(list, into,    n, a, i) { n = split(list, a, " "); for (i = 1; i <= n; i++) into[a[i]] = 1 }
BEGIN { set_of(DCODES, dcode); set_of(DNAMES, dname); set_of(ONAMES, oname); set_of(OLAST, olast) }
FNR == 1 { incomment = 0; pending = 0; delete seen; delete last_report; lua = FILENAME ~ /\.lua$/ }
function report(r) { printf "%s:%d:%s: %s\n", FILENAME, FNR, r, $0 }
# Records token t of rule r at this line; reports once per cluster when n distinct ones
# fall within w lines.
function note(r, t, w, n,    c, key, parts, distinct) {
  seen[r SUBSEP FNR SUBSEP t] = 1
  c = 0
  for (key in seen) {
    split(key, parts, SUBSEP)
    if (parts[1] == r && parts[2] > FNR - w && !(parts[3] in distinct)) { distinct[parts[3]] = 1; c++ }
  }
  if (c >= n && (!(r in last_report) || FNR - last_report[r] >= w)) { report(r); last_report[r] = FNR }
}
# The net count of ( minus ) in s: above 0, a code sits inside a call or a condition.
function depth(s,    t) { t = s; return gsub(/\(/, "", t) - gsub(/\)/, "", s) }
{
  line = $0
  # drop comments (C block and line comments, Lua line comments)
  if (lua) { sub(/--.*/, "", line) }
  else {
    out = ""
    while (length(line) > 0) {
      if (incomment) {
        e = index(line, "*/"); if (!e) { line = ""; break }
        line = substr(line, e + 2); incomment = 0
      } else {
        b = index(line, "/*"); s = index(line, "//")
        if (s && (!b || s < b)) { out = out substr(line, 1, s - 1); line = ""; break }
        if (!b) { out = out line; line = ""; break }
        out = out substr(line, 1, b - 1); line = substr(line, b + 2); incomment = 1
      }
    }
    line = out
  }
  # forget what left every window (the widest is 12 lines)
  for (key in seen) { split(key, parts, SUBSEP); if (parts[2] <= FNR - 12) delete seen[key] }

  # an array by dtype: its first content must be a table walk (or designated entries)
  if (pending && line ~ /[^ \t]/) {
    pending = 0
    if (line !~ /^[ \t]*(TD_DTYPE|\[)/) report("dtype-array")
  }
  if (match(line, /\[TD_NUM_DTYPES\][^;=]*=[ \t]*\{/)) {
    rest = substr(line, RSTART + RLENGTH)
    if (rest ~ /[^ \t]/) { if (rest !~ /^[ \t]*(TD_DTYPE|\[)/) report("dtype-array") }
    else pending = 1
  }

  rest = line; done = ""
  while (match(rest, /TD_[A-Z0-9_]+/)) {
    t = substr(rest, RSTART, RLENGTH); before = done substr(rest, 1, RSTART - 1)
    done = before t; rest = substr(rest, RSTART + RLENGTH)
    b = before; sub(/C\.$/, "", b); sub(/[ \t]+$/, "", b)
    if (t in dcode) {
      if (b ~ /(^|[^A-Za-z0-9_])case$/) note("dtype-cases", t, 12, 2)
      else if ((b ~ /\[$/ && rest ~ /^\]/) || b ~ /(==|!=|~=)$/ ||
               (depth(before) <= 0 && b ~ /([{,]|[^=!~<>]=)$/)) note("dtype-codes", t, 3, 3)
    }
    if (t in olast && (rest ~ /^[ \t]*\+[ \t]*1/ || b ~ /[<>]=?$/)) note("op-bounds", t, 1, 1)
    if (lua && t ~ /^TD_(BINARY|UNARY|RED)_/ && before ~ /[a-z_0-9][ \t]*=[ \t]*C\.$/) note("op-codes", t, 3, 2)
  }

  # dtype names: in C only inside string literals (bool is also a C type)
  text = line
  if (!lua) {
    text = ""; rest = line
    while (match(rest, /"([^"\\]|\\.)*"/)) { text = text " " substr(rest, RSTART + 1, RLENGTH - 2); rest = substr(rest, RSTART + RLENGTH) }
  }
  rest = text
  while (match(rest, /(torch\.)?[a-z][a-z0-9_]*/)) {
    w = substr(rest, RSTART, RLENGTH); pre = RSTART > 1 ? substr(rest, RSTART - 1, 1) : ""
    rest = substr(rest, RSTART + RLENGTH)
    if (pre ~ /[A-Za-z0-9_]/ || rest ~ /^[A-Za-z0-9_]/) continue
    sub(/^torch\./, "", w)
    if (w in dname) note("dtype-names", w, 1, 3)
  }
  rest = line
  while (match(rest, /["\047][a-z][a-z0-9_]*["\047]/)) {
    w = substr(rest, RSTART + 1, RLENGTH - 2); rest = substr(rest, RSTART + RLENGTH)
    sub(/_$/, "", w)
    if (w in oname) note("op-names", w, 3, 3)
  }
  # and 3 or more in one C string: a list in a message
  if (!lua) {
    rest = text; delete inmsg; c = 0
    while (match(rest, /[a-z][a-z0-9_]*/)) {
      w = substr(rest, RSTART, RLENGTH); pre = RSTART > 1 ? substr(rest, RSTART - 1, 1) : ""
      rest = substr(rest, RSTART + RLENGTH)
      if (pre ~ /[A-Za-z0-9_]/ || rest ~ /^[A-Za-z0-9_]/) continue
      if (w in oname && !(w in inmsg)) { inmsg[w] = 1; c++ }
    }
    if (c >= 3) report("op-names")
  }
}' $files | awk '!seen[$0]++')

bad=""
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  file=${hit%%:*}; rule=$(cut -d: -f3 <<<"$hit")
  if grep -qxF "$file:$rule" <(sed -E 's/[[:space:]].*//' <<<"$allowed"); then
    [ -n "${CHECK_TABLES_VERBOSE:-}" ] && echo "allowed: $hit"
    continue
  fi
  bad+="$hit"$'\n'
done <<<"$found"

if [ -n "$bad" ]; then
  echo "check_tables: dtypes or ops listed by hand (derive them from core/include/dtype_table.h" >&2
  echo "or op_table.h, see docs/c-api.md; or allow the place in scripts/check_tables.sh, with why):" >&2
  printf '%s' "$bad" | sed 's/^/  /' >&2
  echo "check_tables: $(printf '%s' "$bad" | grep -c .) line(s)" >&2
  exit 1
fi
echo "check_tables: dtypes and ops are listed only in core/include/dtype_table.h and op_table.h"
