#!/usr/bin/env bash
# Builds the filters of the mixed-language pipeline into target/bridges/ (idempotent, safe to
# run from several workers at once): the C one with CMake, the Java one with Maven, the Go
# one with go build; the Python one runs from sdk/python. Prints nothing but errors.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/target/bridges"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -x "$out/lower_words" ] && [ -x "$out/count_words" ] && [ -s "$out/java.classpath" ] \
   && [ "$out/lower_words" -nt "$root/sdk/c/examples/lower_words.c" ]; then
  exit 0
fi
cmake -S "$root/sdk/c" -B "$out/c-build" -DCMAKE_BUILD_TYPE=Release -DHEDDLE_BRIDGE_TESTS=OFF >/dev/null
cmake --build "$out/c-build" --target lower_words -j2 >/dev/null
cp "$out/c-build/lower_words" "$out/lower_words"
go=$(command -v go || echo /usr/local/go/bin/go)
(cd "$root/sdk/go" && "$go" build -o "$out/count_words" ./examples/count_words)
(cd "$root/sdk/java" && mvn -q -B -DskipTests package dependency:copy-dependencies \
   -DincludeScope=runtime -DoutputDirectory=target/lib >/dev/null)
echo "$root/sdk/java/target/classes:$root/sdk/java/target/lib/*" > "$out/java.classpath"
