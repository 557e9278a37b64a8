#!/usr/bin/env bash
# Builds the filters of the mixed-language pipeline and of `heddle bench bridges` into
# target/bridges/ (idempotent, safe to run from several workers at once): C with CMake (the
# pipeline's filter, the reference filter, the raw ping-pong baseline), Java with Maven, Go
# with go build; the Python ones run from sdk/python. Prints nothing but errors.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/target/bridges"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$out/.built"
newest=$(find "$root/sdk/c" "$root/sdk/go" "$root/sdk/java/src" "$root/sdk/java/pom.xml" "$0" \
  -path '*/build' -prune -o -type f -newer "$stamp" -print -quit 2>/dev/null || true)
if [ -f "$stamp" ] && [ -z "$newest" ]; then
  exit 0
fi
cmake -S "$root/sdk/c" -B "$out/c-build" -DCMAKE_BUILD_TYPE=Release -DHEDDLE_BRIDGE_TESTS=OFF >/dev/null
cmake --build "$out/c-build" --target lower_words reference_filter raw_pingpong -j2 >/dev/null
cp "$out/c-build/lower_words" "$out/lower_words"
cp "$out/c-build/raw_pingpong" "$out/raw_pingpong"
cp "$out/c-build/reference_filter" "$out/c_reference_filter"
go=$(command -v go || echo /usr/local/go/bin/go)
(cd "$root/sdk/go" && "$go" build -o "$out/count_words" ./examples/count_words \
  && "$go" build -o "$out/go_reference_filter" ./cmd/reference_filter)
(cd "$root/sdk/java" && mvn -q -B -DskipTests package dependency:copy-dependencies \
   -DincludeScope=runtime -DoutputDirectory=target/lib >/dev/null)
(cd "$root/sdk/java" && mvn -q -B test-compile >/dev/null)
echo "$root/sdk/java/target/classes:$root/sdk/java/target/lib/*" > "$out/java.classpath"
echo "$root/sdk/java/target/test-classes:$root/sdk/java/target/classes:$root/sdk/java/target/lib/*" \
  > "$out/java-tests.classpath"
touch "$stamp"
