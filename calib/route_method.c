/* route_method.c - the toolchain's routing registry (see route_method.h). */
#include "route_method.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lc_util.h"
#include "params.h"

#define NEURON(n, rt, r, calib, summary) {n, rt, r, calib, "", sc_eval_router, 0, summary}

static const sc_route_method m_dense = NEURON("dense", SRT_METHOD_DENSE, SRT_ROUTER_DENSE, "", "every MLP neuron");
static const sc_route_method m_cats =
    NEURON("cats", SRT_METHOD_CATS, SRT_ROUTER_CATS, "", "top-K of |phi(u_j)| per token (the CATS paper)");
static const sc_route_method m_cats_thr =
    NEURON("cats-threshold", SRT_METHOD_CATS_THRESHOLD, SRT_ROUTER_CATS_THRESHOLD, "cats",
           "|phi(u_j)| above the layer's threshold from the CATS histogram");
static const sc_route_method m_claws = NEURON("claws", SRT_METHOD_CLAWS, SRT_ROUTER_CLAWS, "claws",
                                              "top-K of |phi(u_j)| c_j per token (the CLAWS paper)");
static const sc_route_method m_griffin = {
    "griffin", SRT_METHOD_GRIFFIN, SRT_ROUTER_GRIFFIN, "", "", sc_eval_router, SC_RM_PROMPT,
    "a fixed top-K set per layer chosen from the prompt's activations (the GRIFFIN paper)"};
static const sc_route_method m_griffin_prefill = {
    "griffin-prefill", -1, SRT_ROUTER_GRIFFIN, "", "", sc_eval_router, SC_RM_PROMPT | SC_RM_PREFILL,
    "griffin with the prompt routed by its own set too"};
static const sc_route_method m_oracle =
    NEURON("oracle", -1, SRT_ROUTER_ORACLE, "", "top-K of |h_j| (an upper bound for any neuron router)");
static const sc_route_method m_larosa = {
    "larosa", SRT_METHOD_LAROSA, SRT_ROUTER_DENSE, "larosa", SC_LAROSA_EVAL_KEYS, sc_eval_larosa,
    SC_RM_FOLD | SC_RM_REPORT_LAROSA, "top-K of the rotated block inputs and of h (the LaRoSA paper)"};
static const sc_route_method m_cett = {
    "cett", SRT_METHOD_CETT, SRT_ROUTER_DENSE, "cett", SC_CETT_ROUTING_KEYS, sc_eval_cett,
    SC_RM_TARGET | SC_RM_REPORT_CETT, "|h_j| ||W_d[:, j]|| above the layer's CETT threshold (the CLADA paper)"};
static const sc_route_method m_clada = {
    "clada", SRT_METHOD_CLADA, SRT_ROUTER_DENSE, "cett,clada", SC_CETT_ROUTING_KEYS, sc_eval_cett,
    SC_RM_TARGET | SC_RM_CLADA | SC_RM_REPORT_CETT,
    "cett's thresholds scaled per token by the load signals of the model's own logits (the CLADA paper)"};
static const sc_route_method m_teal = {
    "teal", SRT_METHOD_TEAL, SRT_ROUTER_DENSE, "teal", "", sc_eval_teal, SC_RM_REPORT_INPUT,
    "every linear input thresholded at one sparsity (the TEAL paper)"};
static const sc_route_method m_teal_greedy = {
    "teal-greedy", SRT_METHOD_TEAL_GREEDY, SRT_ROUTER_DENSE, "teal", "", sc_eval_teal, SC_RM_GREEDY | SC_RM_REPORT_INPUT,
    "teal with per-projection sparsities from the greedy allocation curve"};
static const sc_route_method m_teal_cats = {
    "teal-cats", SRT_METHOD_TEAL_CATS, SRT_ROUTER_CATS, "teal", "", sc_eval_teal, SC_RM_REPORT_INPUT,
    "teal's thresholds on the attention and gate inputs, then top-K of |phi(u_j)| on up and down (TEAL, CATS papers)"};
static const sc_route_method m_cwic = {
    "cwic", SRT_METHOD_CWIC, SRT_ROUTER_DENSE, "cwic", SC_CWIC_EVAL_KEYS, sc_eval_cwic,
    SC_RM_REPORT_INPUT | SC_RM_FILE, "CWIC stripe-column thresholds fitted to a target APR"};

static const sc_route_method *const registry[] = {
    &m_dense, &m_cats, &m_cats_thr, &m_claws, &m_griffin, &m_griffin_prefill, &m_oracle,
    &m_larosa, &m_cett, &m_clada, &m_teal, &m_teal_greedy, &m_teal_cats, &m_cwic, NULL};

const sc_route_method *const *sc_route_methods(void) { return registry; }

const sc_route_method *sc_route_method_find(const char *name) {
    for (int i = 0; name && registry[i]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

bool sc_route_method_calibrated(const sc_route_method *rm, const sc_calib *c) {
    for (const char *p = rm->calib; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        if (!c || !sc_calib_state(c, name)) return false;
        if (!end) break;
        p = end + 1;
    }
    return true;
}

bool sc_route_method_from_file(const sc_route_method *rm, const char *params) {
    return rm && (rm->flags & SC_RM_FILE) && sc_params_has(params, SC_RM_FILE_KEY);
}

const char *sc_route_method_needs(const sc_route_method *rm, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = '\0';
    for (const char *p = rm->calib; *p && n < cap;) {
        const char *end = strchr(p, ',');
        int len = (int)(end ? end - p : (ptrdiff_t)strlen(p));
        int k = snprintf(buf + n, cap - n, "%s%.*s", n ? " and " : "", len, p);
        n += k > 0 ? (size_t)k : 0;
        if (!end) break;
        p = end + 1;
    }
    return buf;
}

const char *sc_route_method_names(char *buf, size_t cap, bool runtime_only) {
    size_t n = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; registry[i]; i++) {
        if (runtime_only && registry[i]->runtime < 0) continue;
        int k = snprintf(buf + n, cap > n ? cap - n : 0, "%s%s", n ? ", " : "", registry[i]->name);
        n += k > 0 ? (size_t)k : 0;
        if (n >= cap) break;
    }
    return buf;
}
