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

/* Like cJSON_Print / cJSON_PrintUnformatted (pretty or not); the result is
 * malloc'd through cJSON's allocator (free with cJSON_free), NULL when out of
 * memory. j is not modified. */
char *sc_json_print(const cJSON *j, bool pretty);

#endif
