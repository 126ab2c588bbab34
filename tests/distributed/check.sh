# Sourced by the distributed tests' scripts: check NAME CONDITION... prints PASS or FAIL and
# counts the failures (end with `[ "$failures" = 0 ]`); now is the time in seconds.
failures=0
check() {
  name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
now() { date +%s.%N; }
