/* json_out.h - printing cJSON trees without losing precision.
 *
 * cJSON prints a double with 15 significant digits whenever that reads back
 * within a relative DBL_EPSILON of the value, so a number can come back one
 * unit in the last place off. Everything sparsecal writes as JSON (artifact
 * manifests, .scal option blocks, --json results) goes through this printer
 * instead: integral values print as integers, every other double in the
 * shortest form that reads back exactly. */
#ifndef SC_JSON_OUT_H
#define SC_JSON_OUT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* Like cJSON_Print / cJSON_PrintUnformatted (pretty or not); the result is
 * malloc'd through cJSON's allocator (free with cJSON_free), NULL when out of
 * memory. j is not modified. */
char *sc_json_print(const cJSON *j, bool pretty);

/* One canonical text for a JSON value, whoever printed it: v printed compactly
 * by the runtime's printer (srt_json_print: members in order, integers as
 * integers, other numbers in the shortest form that reads back exactly). Two
 * texts of the same value give the same canonical text, so option blocks can
 * be compared with strcmp. Writes the NUL-terminated text to out and returns
 * 0; -1 when out of memory or when it does not fit in cap. */
struct srt_json;
int sc_json_canonical_value(const struct srt_json *v, char *out, size_t cap);
/* The same for len bytes of JSON text; -1 also when the text is not JSON. */
int sc_json_canonical(const char *text, size_t len, char *out, size_t cap);

#endif
