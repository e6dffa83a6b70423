/* fuzz_scal.c - calibration files (.scal): the container, the manifest and
 * every method's arrays, resealed so mutations get past the checksums. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "scal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *b = fz_resealed(data, size);
    const char *p = b ? fz_path(b, size) : NULL;
    sc_calib *c = NULL, *c2 = NULL;
    sc_err err;
    if (p && sc_calib_load(p, NULL, &c, &err) == SC_OK && sc_calib_load(p, NULL, &c2, &err) == SC_OK)
        (void)sc_calib_merge(c, c2, &err); /* the same shard twice: refused, or summed with checked counts */
    sc_calib_free(c);
    sc_calib_free(c2);
    free(b);
    return 0;
}
