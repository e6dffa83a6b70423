#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then a program outside the tree
# (tests/install/decode.c) built against the installed libsparsert three ways:
# pkg-config (shared), and the CMake package's sparsert::sparsert (shared) and
# sparsert::sparsert_static. Each decodes greedily from an artifact packed by
# the installed sparsecal and must print the ids `sparsecal run --temp 0`
# prints for the same prompt.
#   tests/install_sparsert.sh BUILD_DIR SOURCE_DIR ASSETS_DIR CC [EXTRA_CFLAGS]
set -euo pipefail
B=$1 SRC=$2 A=${SPARSECAL_ASSETS:-$3} CC=$4 XFLAGS=${5:-}
fail() { echo "install_sparsert: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config not installed (scripts/setup.sh installs it)"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
P=$d/prefix
cmake --install "$B" --prefix "$P" >/dev/null
S=$P/bin/sparsecal
[ -x "$S" ] || fail "no sparsecal in $P/bin"
pc=$(find "$P" -name sparsert.pc)
[ -n "$pc" ] || fail "no sparsert.pc installed"
for h in srt.h srt_model.h srt_route.h srt_container.h srt_json.h srt_method.h srt_schema.h; do
  [ -f "$P/include/sparsert/$h" ] || fail "public header $h not installed"
  # each public header compiles on its own
  echo "#include \"$h\"" | "$CC" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$P/include/sparsert" -x c - \
    || fail "$h does not compile alone"
done
for h in srt_kern.h srt_model_internal.h srt_file.h srt_pool.h srt_gemv.h srt_container_fmt.h; do
  [ ! -e "$P/include/sparsert/$h" ] || fail "internal header $h installed"
done

# The shared library exports exactly the public headers' functions: none of
# the internals (kernel registration, pool, output helpers), and every public
# function the static library defines.
command -v nm >/dev/null || fail "nm not installed (binutils)"
so=$(find "$P" -name 'libsparsert.so' | head -1)
[ -n "$so" ] || fail "no libsparsert.so installed"
declared=$(cd "$P/include/sparsert" && cat ./*.h | grep -oE '(^|[^A-Za-z0-9_])srt_[a-z0-9_]+[[:space:]]*\(' |
  grep -oE 'srt_[a-z0-9_]+' | sort -u)
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sort -u)
static_defined=$(nm --defined-only "$(find "$P" -name 'libsparsert.a' | head -1)" | awk '$2 == "T" {print $3}' | sort -u)
leaked=$(comm -23 <(echo "$exported") <(echo "$declared"))
[ -z "$leaked" ] || fail "libsparsert.so exports functions no public header declares: $(echo $leaked)"
missing=$(comm -12 <(echo "$declared") <(echo "$static_defined") | comm -23 - <(echo "$exported"))
[ -z "$missing" ] || fail "libsparsert.so does not export public functions: $(echo $missing)"

M=$A/models/stories260K.bin T=$A/models/tok512.bin X=$A/text/tinystories_valid_a.txt
[ -f "$M" ] || fail "assets not found in $A (set SPARSECAL_ASSETS)"
"$S" compute -m "$M" --tokenizer "$T" -f "$X" --max-docs 20 --method claws -o "$d/c.scal" -q
"$S" pack -m "$M" --tokenizer "$T" --calib "$d/c.scal" --layout kmi4 --method claws --density 0.5 -o "$d/m.spk" -q 2>/dev/null
STEPS=40
json=$("$S" run --artifact "$d/m.spk" -p "Once upon a time" --steps $STEPS --temp 0 --json 2>/dev/null)
want=$(grep -o '"tokens":\[[0-9,]*\]' <<<"$json" | tr -dc '0-9,' | tr , ' ')
np=$(grep -o '"prompt_tokens":[0-9]*' <<<"$json" | cut -d: -f2)
[ -n "$want" ] && [ -n "$np" ] || fail "no tokens in run --json: $json"
prompt=$(cut -d' ' -f1-"$np" <<<"$want")
[ "$(wc -w <<<"$want")" -gt $((np + 10)) ] || fail "run generated too few tokens to compare: $want"

export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir sparsert)
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
"$CC" -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror $XFLAGS "$SRC/tests/install/decode.c" \
  $(pkg-config --cflags --libs sparsert) -Wl,-rpath,"$libdir" -o "$d/decode_pc"
# (ldd's output whole first: grep -q closing the pipe early would fail the pipeline under pipefail)
libs=$(ldd "$d/decode_pc")
grep -q "$P/.*libsparsert.so" <<<"$libs" || fail "decode_pc does not load the installed libsparsert.so: $libs"

cmake -S "$SRC/tests/install" -B "$d/cb" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_C_FLAGS="-Wall -Werror $XFLAGS" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON >/dev/null
cmake --build "$d/cb" -j2 >/dev/null
libs=$(ldd "$d/cb/decode_static")
if grep -q libsparsert <<<"$libs"; then fail "decode_static links libsparsert.so: $libs"; fi

for prog in decode_pc cb/decode_shared cb/decode_static; do
  # shellcheck disable=SC2086
  got=$("$d/$prog" "$d/m.spk" $STEPS $prompt)
  [ "$got" = "$want" ] || fail "$prog: $got, sparsecal run: $want"
  echo "$prog: $(wc -w <<<"$got") ids = sparsecal run's"
done
