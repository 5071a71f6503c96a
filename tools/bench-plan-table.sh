#!/bin/sh
# The planner's predictions against runs (docs/planner.md, "Predicted against
# measured"): for each network and rank count, adjoin-plan --net lists its
# plans (measuring what this machine's tables lack), then bench-plan-step runs
# every listed plan and every uniform placement of the ranks, and the table
# sets predicted beside measured step time and peak memory per rank, with the
# planner's first choice marked.  Per network and rank count it then prints
# how far the first choice is from the fastest placement measured, and with a
# memory budget below what data parallelism needs, the plan the planner picks
# and the memory it ran in.  The budget lies halfway between the least memory
# predicted for any placement run above and data parallelism's, so a plan fits
# whenever one of those runs would; where none needs less than data
# parallelism, it is 2% below, and "no plan fits" is the expected answer.
#
#   sh tools/bench-plan-table.sh [--launcher CMD] [--ranks "1 2"] [--nets "lenet5 mlp encdec"]
#                                [--batch 64] [--steps 5] [--rounds 5] [--keep 5] [--no-uniform]
#                                [--cache DIR] BUILD_DIR
#
# CMD starts a program on K ranks as `CMD -n K PROGRAM ARGS...` (default
# mpiexec.mpich, else mpiexec; on the emulated cluster
# "tools/cluster-run.sh --cluster NAME --per-host 1").  DIR holds the
# machine's measured figures (machine-K, layer-times; default a fresh
# directory, so the machine is measured in this run).  Exit status 0 when
# every run ran, whatever the ratios (they are reported, not asserted).
set -eu

die() {
  echo "bench-plan-table.sh: $*" >&2
  exit 2
}

launcher=$(command -v mpiexec.mpich || command -v mpiexec || echo mpiexec)
ranks="1 2" nets="lenet5 mlp encdec" batch=64 steps=5 rounds=5 keep=5 uniform=yes cache=''
while [ $# -gt 1 ]; do
  case $1 in
    --launcher | --ranks | --nets | --batch | --steps | --rounds | --keep | --cache)
      [ $# -ge 3 ] || die "option '$1' needs a value"
      case $1 in
        --launcher) launcher=$2 ;; --ranks) ranks=$2 ;; --nets) nets=$2 ;; --batch) batch=$2 ;;
        --steps) steps=$2 ;; --rounds) rounds=$2 ;; --keep) keep=$2 ;; --cache) cache=$2 ;;
      esac
      shift 2
      ;;
    --no-uniform) uniform=no; shift ;;
    *) die "unknown option '$1' (see the top of this script)" ;;
  esac
done
[ $# -eq 1 ] || die "usage: sh tools/bench-plan-table.sh [options] BUILD_DIR"
build=$1
plan=$build/apps/adjoin-plan bench=$build/bench/bench-plan-step
if [ ! -x "$plan" ] || [ ! -x "$bench" ]; then die "no $plan or $bench: build them (ninja -C $build)"; fi
for n in $batch $steps $rounds $keep; do
  case $n in *[!0-9]* | '' | 0*) die "'$n' is not a positive whole number" ;; esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ADJ_PLAN_CACHE="${cache:-$work/cache}"
rows=$work/rows
: >"$rows"

# run_one NET K PLACEMENT MARK: one bench-plan-step run, its summary as a row.
run_one() {
  if ! $launcher -n "$2" "$bench" --batch "$batch" --steps "$steps" --rounds "$rounds" \
    "$here/networks/$1.net" "$3" </dev/null >"$work/out" 2>"$work/err"; then
    echo "bench-plan-table.sh: $1 on $2 ranks, $3: failed: $(tail -3 "$work/err")" >&2
    return 1
  fi
  sed -n 's/^summary //p' "$work/out" | awk -v mark="$4" '{ print mark, $0 }' >>"$rows"
}

echo "# $(uname -n), $(nproc) cores online; launcher: $launcher; batch $batch, $rounds rounds of $steps steps"
failed=0
for net in $nets; do
  for k in $ranks; do
    dir=$work/$net-$k
    mkdir -p "$dir"
    $launcher -n "$k" "$plan" --net "$here/networks/$net.net" --batch "$batch" --keep "$keep" \
      --write-dir "$dir" >"$dir/plan.txt" 2>&1 || { cat "$dir/plan.txt" >&2; failed=1; continue; }
    for f in "$dir"/plan-*.place; do
      [ -f "$f" ] || continue
      mark=listed
      [ "$(basename "$f")" = plan-1.place ] && mark=first
      run_one "$net" "$k" "$f" "$mark" || failed=1
    done
    [ "$uniform" = yes ] || continue
    $launcher -n "$k" "$plan" --net "$here/networks/$net.net" --batch "$batch" --uniform >"$dir/uniform.txt"
    while read -r name; do run_one "$net" "$k" "$name" uniform || failed=1; done <"$dir/uniform.txt"
  done
done

# The table, then per network and ranks the first choice against the fastest run.
awk '
function field(key,   i, n, kv) {
  for (i = 2; i <= NF; i++) { n = index($i, "="); if (substr($i, 1, n - 1) == key) return substr($i, n + 1) }
  return ""
}
{
  net = field("network"); k = field("ranks"); key = net " " k
  place = $0; sub(/.* placement=/, "", place)
  printf "%-7s %-6s %2d %11.4e %11.4e %6.3f %9.2f %9.2f %6.3f  %s\n", $1, net, k, field("predicted_s"),
         field("measured_s"), field("time_ratio"), field("predicted_mib"), field("peak_mib"), field("memory_ratio"), place
  m = field("measured_s") + 0
  if (!(key in best) || m < best[key]) best[key] = m
  if ($1 == "first") first[key] = m
  runs[key]++; keys[key] = 1
  t = field("time_ratio") + 0; r = field("memory_ratio") + 0
  if (t >= 0.75 && t <= 1.33) time_in[key]++
  if (r >= 0.8 && r <= 1.25) memory_in[key]++
}
BEGIN {
  printf "%-7s %-6s %2s %11s %11s %6s %9s %9s %6s  %s\n", "plan", "net", "P", "pred s", "meas s", "ratio",
         "pred MiB", "peak MiB", "ratio", "placement"
}
END {
  print ""
  printf "%-6s %2s %5s %14s %14s %16s %12s %9s\n", "net", "P", "runs", "time in .75-1.33", "peak in .8-1.25",
         "first choice s", "fastest s", "first/fast"
  for (key in keys) {
    split(key, part, " ")
    printf "%-6s %2d %5d %14d %14d %16.4e %12.4e %9.3f\n", part[1], part[2], runs[key], time_in[key] + 0,
           memory_in[key] + 0, first[key], best[key], (best[key] > 0 ? first[key] / best[key] : 0)
  }
}' "$rows"

# A budget below data parallelism's memory on the most ranks given.
all=$work/all-rows
cp "$rows" "$all"
k=$(echo "$ranks" | tr ' ' '\n' | sort -n | tail -1)
if [ "$k" -gt 1 ]; then
  echo
  printf "%-6s %2s %12s %12s %12s %12s %12s  %s\n" net P "dp MiB" "least MiB" "budget MiB" "pred MiB" "peak MiB" \
    "chosen plan"
  for net in $nets; do
    dp=$($launcher -n "$k" "$plan" --net "$here/networks/$net.net" --batch "$batch" --predict "replicas=$k" |
      sed -n 's/^memory of rank 0 \([0-9.]*\) MiB.*/\1/p')
    [ -n "$dp" ] || { echo "bench-plan-table.sh: no prediction of replicas=$k for $net" >&2; failed=1; continue; }
    least=$(awk -v net="$net" -v k="$k" '
      { for (i = 2; i <= NF; i++) { n = index($i, "="); v[substr($i, 1, n - 1)] = substr($i, n + 1) } }
      v["network"] == net && v["ranks"] == k && (least == "" || v["predicted_mib"] + 0 < least) { least = v["predicted_mib"] + 0 }
      END { print least }' "$all")
    budget=$(awk -v m="$dp" -v least="$least" 'BEGIN {
      printf "%d", (least != "" && least + 0 < m ? (least + m) / 2 : m * 0.98) * 1048576 }')
    if ! $launcher -n "$k" "$plan" --net "$here/networks/$net.net" --batch "$batch" --memory "$budget" \
      --keep 1 --write "$work/budget.place" >"$work/budget.txt" 2>&1 || [ ! -f "$work/budget.place" ]; then
      printf "%-6s %2d %12.2f %12s %12.2f %12s %12s  %s\n" "$net" "$k" "$dp" "${least:--}" \
        "$(awk -v b="$budget" 'BEGIN { print b / 1048576 }')" - - "no plan fits"
      rm -f "$work/budget.place"
      continue
    fi
    : >"$rows"
    run_one "$net" "$k" "$work/budget.place" budget || { failed=1; continue; }
    awk -v dp="$dp" -v least="${least:--}" -v budget="$budget" '{
      for (i = 2; i <= NF; i++) { n = index($i, "="); v[substr($i, 1, n - 1)] = substr($i, n + 1) }
      place = $0; sub(/.* placement=/, "", place)
      printf "%-6s %2d %12.2f %12s %12.2f %12.2f %12.2f  %s%s\n", v["network"], v["ranks"], dp, least, budget / 1048576,
             v["predicted_mib"], v["peak_mib"], place, (v["peak_mib"] * 1048576 <= budget ? "" : "  (over the budget)")
    }' "$rows"
    rm -f "$work/budget.place"
  done
fi
exit $failed
