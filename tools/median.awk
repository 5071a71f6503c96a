# median(list, n): the median of list[1..n], for the benchmark scripts'
# summaries: awk -f tools/median.awk -f /dev/stdin DATA <<'SUMMARY' ... SUMMARY
function median(list, n,   i, j, t, a) {
  for (i = 1; i <= n; i++) a[i] = list[i]
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
