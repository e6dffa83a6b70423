/* params.h - method parameters, the --params "key=value,..." of compute,
 * eval and pack: one typed parser. A reader declares the keys it takes
 * (type, range or choices, where the value goes) and sc_params_read fills
 * them; sc_params_check refuses a key no reader of the command takes, naming
 * the ones it knows. A --params string is shared by every reader of a command
 * (pack stores several methods' data), so each reader leaves the others' keys
 * alone and the command checks the union once. */
#ifndef SC_PARAMS_H
#define SC_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef enum sc_param_type {
    SC_PARAM_NUM = 0, /* a finite double in [lo, hi] -> double */
    SC_PARAM_INT,     /* a decimal integer in [lo, hi] -> int64_t */
    SC_PARAM_STR      /* a string (one of choices when given) -> char[cap] */
} sc_param_type;

typedef struct sc_param {
    const char *key;
    sc_param_type type;
    double lo, hi;       /* NUM, INT */
    const char *choices; /* STR: the accepted values, comma-separated (NULL: any non-empty value of < cap bytes) */
    void *out;           /* where the value goes; untouched when the key is absent (holds the default) */
    size_t cap;          /* STR: bytes at out */
    bool *given;         /* optional: set to whether the key is present */
} sc_param;

/* Reads the keys spec[0..n) declares from params (NULL or "": none): each
 * present key's value must parse as its type within its range or choices,
 * else SC_EARG with one line naming who, the key and the value. Items are
 * key=value; keys spec does not declare are left to their readers. */
sc_status sc_params_read(const char *params, const sc_param *spec, int n, const char *who, sc_err *err);

/* Checks that params is a list of key=value items whose keys are all in
 * `known` (comma-separated; "" accepts none) and appear once: a misspelt
 * key (tagret=0.5) is an error naming the known ones, never ignored. */
sc_status sc_params_check(const char *params, const char *known, const char *who, sc_err *err);

/* Whether key is present (any value). */
bool sc_params_has(const char *params, const char *key);

#endif
