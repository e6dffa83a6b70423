/* plan.c - fitting the routing plan from a calibration (see plan.h). */
#include "plan.h"

/* TEAL's calibration taps are the rows of the artifact's teal_thresholds table */
_Static_assert(SC_TEAL_NTAPS == SRT_TEAL_NTAPS, "TEAL taps: calib/methods/teal.h and srt_schema.h disagree");

bool sc_plan_teal_table(void *teal_state, int64_t layer, double *cum, float out[SC_TEAL_NTAPS * SRT_THR_GRID]) {
    if (!sc_teal_hist(teal_state, layer, 0)) return false;
    for (int tap = 0; tap < SC_TEAL_NTAPS; tap++) {
        sc_teal_cumulative(sc_teal_hist(teal_state, layer, tap), cum);
        for (int i = 0; i < SRT_THR_GRID; i++) out[tap * SRT_THR_GRID + i] = (float)sc_teal_threshold(cum, srt_thr_grid(i));
    }
    return true;
}
