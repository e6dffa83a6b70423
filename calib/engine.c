/* engine.c - the calibration data loop (see engine.h). */
#define _POSIX_C_SOURCE 200809L
#define XXH_INLINE_ALL
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "json_out.h"
#include "router.h"
#include "srt_json.h"
#include "scal.h"

sc_status sc_model_check_identity(const sc_model *m, const char *id, const char *path, sc_err *err) {
    if (m->source_id[0] && strcmp(m->source_id, id) == 0) return SC_OK; /* an artifact of that model */
    char own[17];
    SC_TRY(sc_model_identity(m, own, err));
    if (strcmp(own, id) == 0) return SC_OK;
    if (m->source_id[0])
        return sc_errf(err, SC_EARG, "%s: computed on another model (identity %s; this artifact is %s, packed from %s)",
                       path, id, own, m->source_id);
    return sc_errf(err, SC_EARG, "%s: computed on another model (identity %s, this model is %s)", path, id, own);
}

void sc_compute_opts_default(sc_compute_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_count = 1;
    o->ce_weight = 0.2;
    o->student = SRT_ROUTER_CATS;
    o->student_density = 0.5;
}

/* The hash covers the f32 values the model computes with, however they are
 * stored: weights converted on use are hashed after conversion, in the same
 * order, so a model hashes the same resident or not. */
sc_status sc_model_identity(const sc_model *m, char out[17], sc_err *err) {
    const sc_config *c = &m->cfg;
    XXH64_state_t *st = XXH64_createState();
    XXH64_reset(st, 0);
    uint32_t eps_bits, theta_bits;
    memcpy(&eps_bits, &c->norm_eps, 4);
    memcpy(&theta_bits, &c->rope_theta, 4);
    int64_t dims[] = {c->family,     c->dim, c->ffn_dim,     c->n_layers,        c->n_heads,  c->n_kv_heads,
                      c->head_dim,   c->vocab_size, c->rope, c->act,             c->embed_scale, c->tied_classifier,
                      c->qkv_bias,   eps_bits, theta_bits,   c->rope_scaling};
    XXH64_update(st, dims, sizeof dims);
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    sc_status s = SC_OK;
    if (m->tok_emb) {
        XXH64_update(st, m->tok_emb, (size_t)(c->vocab_size * D) * 4);
    } else { /* converted on use: hash the same f32 rows in the same order */
        int64_t chunk = 4096;
        float *rows = malloc((size_t)(chunk * D) * sizeof(float));
        int32_t *ids = malloc((size_t)chunk * sizeof(int32_t));
        if (!rows || !ids) s = sc_errf(err, SC_ENOMEM, "%s: out of memory", m->path);
        for (int64_t r0 = 0; !s && r0 < c->vocab_size; r0 += chunk) {
            int64_t n = c->vocab_size - r0 < chunk ? c->vocab_size - r0 : chunk;
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(r0 + i);
            if (!(s = sc_model_embed(m, ids, n, rows, err))) XXH64_update(st, rows, (size_t)(n * D) * 4);
        }
        free(rows);
        free(ids);
    }
    for (int64_t l = 0; !s && l < c->n_layers; l++) { /* one matrix at a time as f32 (sc_model_weight) */
        const sc_layer *L = &m->layers[l];
        struct {
            const float *const *field;
            int64_t n;
        } parts[] = {{&L->attn_norm, D},     {&L->wq, qd * D},       {&L->wk, kvd * D}, {&L->wv, kvd * D},
                     {&L->wo, qd * D},       {&L->ffn_norm, D},      {&L->wg, F * D},   {&L->wu, F * D},
                     {&L->wd, F * D},        {&L->attn_rot, D * D},  {&L->mlp_rot, D * D}};
        for (size_t i = 0; !s && i < sizeof parts / sizeof parts[0]; i++) {
            const float *W = *parts[i].field;
            if (!W && (s = sc_model_weight(m, parts[i].field, &W, err))) break;
            if (W) XXH64_update(st, W, (size_t)parts[i].n * 4); /* folded LaRoSA rotations when present (unrotated
                                                                   models hash exactly as before) */
        }
    }
    if (!s) XXH64_update(st, m->final_norm, (size_t)D * 4);
    for (int64_t r0 = 0, chunk = sc_model_classifier_chunk(m); !s && !c->tied_classifier && r0 < c->vocab_size; r0 += chunk) {
        int64_t n = c->vocab_size - r0 < chunk ? c->vocab_size - r0 : chunk;
        const float *W;
        if (!(s = sc_model_classifier_rows(m, r0, n, &W, err))) XXH64_update(st, W, (size_t)(n * D) * 4);
    }
    snprintf(out, 17, "%016llx", (unsigned long long)XXH64_digest(st));
    XXH64_freeState(st);
    return s;
}

void sc_calib_free(sc_calib *c) {
    if (!c) return;
    for (int i = 0; i < c->n_entries; i++) c->entries[i].method->free(c->entries[i].state);
    sc_scal_file_close(c->file);
    free(c);
}

void *sc_calib_state(const sc_calib *c, const char *method) {
    for (int i = 0; i < c->n_entries; i++)
        if (strcmp(c->entries[i].method->name, method) == 0) return c->entries[i].state;
    return NULL;
}

sc_status sc_calib_new(const sc_model *m, const char *const *methods, int n, int64_t layer_begin, int64_t layer_end,
                       const char *params, sc_calib **out, sc_err *err) {
    return sc_calib_new_ex(m, methods, n, layer_begin, layer_end, params, false, out, err);
}

sc_status sc_calib_new_ex(const sc_model *m, const char *const *methods, int n, int64_t layer_begin, int64_t layer_end,
                          const char *params, bool reader, sc_calib **out, sc_err *err) {
    *out = NULL;
    if (n <= 0 || n > SC_MAX_METHODS) return sc_errf(err, SC_EARG, "give 1 to %d methods", SC_MAX_METHODS);
    if (layer_end == 0) layer_end = m->cfg.n_layers;
    if (layer_begin < 0 || layer_end > m->cfg.n_layers || layer_begin >= layer_end)
        return sc_errf(err, SC_EARG, "layers %lld:%lld are outside the model's %lld layers",
                       (long long)layer_begin, (long long)layer_end, (long long)m->cfg.n_layers);
    sc_calib *c = calloc(1, sizeof *c);
    if (!c) return sc_errf(err, SC_ENOMEM, "out of memory");
    c->layer_begin = layer_begin;
    c->layer_end = layer_end;
    c->ffn_dim = m->cfg.ffn_dim;
    c->dim = m->cfg.dim;
    c->n_layers = m->cfg.n_layers;
    sc_method_opts mo = {layer_begin, layer_end, params, reader};
    for (int i = 0; i < n; i++) {
        const sc_method *me = sc_method_find(methods[i]);
        if (!me) {
            sc_calib_free(c);
            return sc_errf(err, SC_EARG, "unknown method '%s'", methods[i]);
        }
        for (int k = 0; k < c->n_entries; k++)
            if (c->entries[k].method == me) {
                sc_calib_free(c);
                return sc_errf(err, SC_EARG, "method '%s' given twice", methods[i]);
            }
        sc_status st = me->create(m, &mo, &c->entries[c->n_entries].state, err);
        if (st) {
            sc_calib_free(c);
            return st;
        }
        c->entries[c->n_entries++].method = me;
    }
    *out = c;
    return SC_OK;
}

/* ---- the data loop ---- */

typedef struct loop_ctx {
    sc_calib *c;
    sc_router *student; /* distillation: routes the student's forward */
    int64_t n_scored;
    uint32_t fwd_mask, grad_mask;
} loop_ctx;

static sc_status dispatch(void *user, const sc_tap_event *ev, sc_err *err) {
    loop_ctx *x = user;
    if (x->student && !ev->is_grad) SC_TRY(sc_router_hook(x->student, ev, err));
    if (ev->replay) return SC_OK; /* the backward pass recomputing a layer: observed already */
    for (int i = 0; i < x->c->n_entries; i++) {
        const sc_method *me = x->c->entries[i].method;
        uint32_t want = ev->is_grad ? me->grad_taps : me->fwd_taps;
        if (want & SC_TAP_BIT(ev->tap)) SC_TRY(me->observe(x->c->entries[i].state, ev, x->n_scored, err));
    }
    return SC_OK;
}

/* The options that must match to merge or resume, in the one canonical JSON
 * form (sc_json_canonical) a loaded .scal's options are read back in, so that
 * strcmp compares values: "%.17g" prints 0.2 as 0.20000000000000001, the
 * canonical form as 0.2. */
static sc_status canonical_options(const sc_compute_opts *o, const sc_calib *c, char *out, size_t cap, sc_err *err) {
    char text[2048];
    size_t pn = 0;
    char *params = srt_json_quote(o->params ? o->params : "", o->params ? strlen(o->params) : 0, &pn);
    if (!params) return sc_errf(err, SC_ENOMEM, "out of memory");
    int n = snprintf(text, sizeof text, "{\"methods\":[");
    for (int i = 0; i < c->n_entries && n > 0 && (size_t)n < sizeof text; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%s\"%s\"", i ? "," : "", c->entries[i].method->name);
    if (n > 0 && (size_t)n < sizeof text)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "],\"seq_len\":%lld,\"max_seqs\":%lld,\"layers\":[%lld,%lld],\"loss\":\"%s\",\"student\":\"%s\","
                      "\"student_density\":%.17g,\"ce_weight\":%.17g,\"params\":%s}",
                      (long long)o->seq_len, (long long)o->max_seqs, (long long)c->layer_begin, (long long)c->layer_end,
                      o->loss == SC_LOSS_KIND_DISTILL ? "distill" : "ce",
                      o->loss == SC_LOSS_KIND_DISTILL ? srt_router_name(o->student) : "none",
                      o->loss == SC_LOSS_KIND_DISTILL ? o->student_density : 0.0,
                      o->loss == SC_LOSS_KIND_DISTILL ? o->ce_weight : 0.0, params);
    free(params);
    if (n <= 0 || (size_t)n >= sizeof text || sc_json_canonical(text, (size_t)n, out, cap))
        return sc_errf(err, SC_EARG, "the calibration options do not fit in %zu bytes (--params is too long)", cap);
    return SC_OK;
}

/* Replaces *c (fresh, with this run's identity) by the checkpoint at path
 * after checking that it is a checkpoint of this very run and shard. */
static sc_status resume_from(const sc_model *m, const char *path, int64_t mine, sc_calib **c, int64_t *skip,
                             sc_err *err) {
    sc_calib *r;
    int64_t done, of;
    SC_TRY(sc_calib_load_checkpoint(path, m, &r, &done, &of, err)); /* (checks the model identity) */
    const sc_calib *f = *c;
    sc_status st = SC_OK;
    char diff[512];
    if (strcmp(r->options, f->options) != 0) { /* (first: other options, e.g. seq_len, also change the data id) */
        sc_calib_options_diff(r->options, f->options, diff, sizeof diff);
        st = sc_errf(err, SC_EARG, "%s: a checkpoint with other options: %s (the checkpoint's vs this run's)", path, diff);
    }
    else if (strcmp(r->data_id, f->data_id) != 0)
        st = sc_errf(err, SC_EARG, "%s: a checkpoint of other data (%s, this run's is %s)", path, r->data_id, f->data_id);
    else if (strcmp(r->shards, f->shards) != 0)
        st = sc_errf(err, SC_EARG, "%s: a checkpoint of shard %s, this run is shard %s", path, r->shards, f->shards);
    else if (of != mine)
        st = sc_errf(err, SC_EARG, "%s: a checkpoint of a run of %lld sequences, this one has %lld", path, (long long)of,
                     (long long)mine);
    for (int i = 0; i < r->n_entries && !st; i++)
        if (r->entries[i].method->resume) st = r->entries[i].method->resume(r->entries[i].state, err);
    if (st) {
        sc_calib_free(r);
        return st;
    }
    sc_calib_free(*c);
    *c = r;
    *skip = done;
    return SC_OK;
}

sc_status sc_calib_compute(const sc_model *m, const sc_dataset *d, const sc_compute_opts *o, sc_calib **out,
                           sc_err *err) {
    *out = NULL;
    if (o->shard_count < 1 || o->shard_index < 0 || o->shard_index >= o->shard_count)
        return sc_errf(err, SC_EARG, "bad shard %lld/%lld", (long long)o->shard_index, (long long)o->shard_count);
    if (o->checkpoint_every < 0 || (o->checkpoint_every > 0 && !o->checkpoint_path))
        return sc_errf(err, SC_EARG, "checkpoints need a period >= 1 and a path");
    sc_calib *c;
    SC_TRY(sc_calib_new(m, o->methods, o->n_methods, o->layer_begin, o->layer_end, o->params, &c, err));
    sc_compute_opts eo = *o;
    if (eo.seq_len <= 0) eo.seq_len = m->cfg.max_seq_len;
    sc_status st = canonical_options(&eo, c, c->options, sizeof c->options, err);
    if (st) {
        sc_calib_free(c);
        return st;
    }
    snprintf(c->shards, sizeof c->shards, "%lld/%lld", (long long)o->shard_index, (long long)o->shard_count);
    st = sc_model_identity(m, c->model_id, err);
    if (st) {
        sc_calib_free(c);
        return st;
    }

    loop_ctx x = {c, NULL, 0, 0, 0};
    for (int i = 0; i < c->n_entries; i++) {
        x.fwd_mask |= c->entries[i].method->fwd_taps;
        x.grad_mask |= c->entries[i].method->grad_taps;
    }
    bool need_grad = x.grad_mask != 0;
    sc_forward *f = NULL;
    float *teacher = NULL;
    /* the selected sequences: those with >= 2 tokens, the first max_seqs, then every n-th for the
     * shard; the workspace holds the longest of them (cut at seq_len), not the model's context */
    int64_t V = m->cfg.vocab_size, T = 2;
    XXH64_state_t *dh = XXH64_createState();
    XXH64_reset(dh, (unsigned long long)eo.seq_len);
    int64_t eligible = 0, mine = 0;
    for (size_t i = 0; i < d->n_seqs; i++) {
        if (d->seqs[i].n < 2) continue;
        if (o->max_seqs > 0 && eligible >= o->max_seqs) break;
        int64_t n = (int64_t)d->seqs[i].n < eo.seq_len ? (int64_t)d->seqs[i].n : eo.seq_len;
        XXH64_update(dh, d->seqs[i].ids, (size_t)n * sizeof(int32_t));
        if (n > T) T = n;
        if (eligible++ % o->shard_count == o->shard_index) mine++;
    }
    snprintf(c->data_id, sizeof c->data_id, "%016llx", (unsigned long long)XXH64_digest(dh));
    XXH64_freeState(dh);
    if (need_grad && o->loss == SC_LOSS_KIND_DISTILL) {
        sc_router_spec rs = {o->student, o->student_density, NULL, NULL, false, NULL, NULL};
        if (o->student != SRT_ROUTER_CATS && o->student != SRT_ROUTER_ORACLE && o->student != SRT_ROUTER_DENSE) {
            st = sc_errf(err, SC_EARG, "the distillation student must use a router that needs no calibration (cats, oracle, dense)");
            goto done;
        }
        if ((st = sc_router_create(m, &rs, &x.student, err))) goto done;
        x.fwd_mask |= sc_router_taps();
    }
    /* no [T x vocab] logits when no method looks at them: the cross-entropy runs over vocabulary chunks,
     * and a pass without gradients stops at the final norm */
    bool no_logits = !(x.fwd_mask & SC_TAP_BIT(SC_TAP_LOGITS)) && (!need_grad || o->loss == SC_LOSS_KIND_CE);
    bool chunked = need_grad && no_logits;
    st = need_grad ? sc_forward_create_train_ex(m, T, chunked ? SC_TRAIN_CHUNKED_LOSS : 0, &f, err)
                   : sc_forward_create_ex(m, T, T, (no_logits ? SC_TRAIN_CHUNKED_LOSS : 0) | SC_FWD_WHOLE_WINDOWS, &f, err);
    if (st) goto done;
    if (need_grad && o->loss == SC_LOSS_KIND_DISTILL) { /* the loss overwrites the logits with their gradient */
        teacher = malloc((size_t)(T * V) * sizeof(float));
        if (!teacher) {
            st = sc_errf(err, SC_ENOMEM, "out of memory for %lld x %lld logits", (long long)T, (long long)V);
            goto done;
        }
    }
    if (mine == 0) {
        st = sc_errf(err, SC_EARG, "no sequence with at least 2 tokens for shard %lld/%lld",
                     (long long)o->shard_index, (long long)o->shard_count);
        goto done;
    }
    int64_t skip = 0; /* resumed: this process's first `skip` sequences are in the checkpoint */
    if (o->resume_path && (st = resume_from(m, o->resume_path, mine, &c, &skip, err))) goto done;
    x.c = c; /* (resume_from replaced it) */
    double t0 = sc_now();
    int64_t k = 0, done_seqs = 0, tokens_run = 0;
    sc_progress pr; /* counts this run's sequences (a resumed run's rate and ETA are its own) */
    sc_progress_start(&pr, o->progress, "compute", "sequences", mine - skip);
    sc_hooks hk = {dispatch, &x, x.fwd_mask};
    sc_hooks ghk = {dispatch, &x, x.grad_mask};
    for (size_t i = 0; i < d->n_seqs && done_seqs < mine; i++) {
        if (d->seqs[i].n < 2) continue;
        if (k++ % o->shard_count != o->shard_index) continue;
        if (done_seqs < skip) {
            done_seqs++;
            continue;
        }
        int64_t n = (int64_t)d->seqs[i].n < T ? (int64_t)d->seqs[i].n : T;
        const int32_t *ids = d->seqs[i].ids;
        x.n_scored = n - 1;
        const float *logits;
        if (teacher) { /* the dense teacher first */
            if ((st = sc_forward_run(f, ids, n, 0, NULL, &logits, err))) break;
            memcpy(teacher, logits, (size_t)(n * V) * sizeof(float));
        }
        if ((st = sc_forward_run(f, ids, n, 0, &hk, &logits, err))) break;
        if (chunked) {
            double loss;
            if ((st = sc_backward_ce(f, &ghk, &loss, err))) break;
        } else if (need_grad) {
            float *dl = sc_forward_logits(f); /* in place: no second [T x vocab] buffer */
            if (teacher)
                sc_loss_distill(logits, teacher, ids, n, V, o->ce_weight, dl);
            else
                sc_loss_ce(logits, ids, n, V, dl);
            if ((st = sc_backward_run(f, dl, &ghk, err))) break;
        }
        c->n_seqs++;
        c->n_tokens += n - 1;
        tokens_run += n;
        done_seqs++;
        if (o->checkpoint_every > 0 && done_seqs % o->checkpoint_every == 0 && done_seqs < mine &&
            (st = sc_calib_save_checkpoint(c, m, o->checkpoint_path, done_seqs, mine, err)))
            break;
        if (o->on_seq && (st = o->on_seq(o->on_seq_user, done_seqs, mine, err))) break;
        sc_progress_update(&pr, done_seqs - skip, (double)tokens_run, NULL);
    }
    sc_progress_end(&pr);
    c->seconds = sc_now() - t0;
    /* the fits need the accumulators and the model, not the pass: its workspace (the [T x ffn] activations,
     * about 450 MiB of a 1B model at 2,048 tokens) goes before them, not after (CETT's fit converts whole
     * layers on top) */
    free(teacher);
    teacher = NULL;
    sc_forward_free(f);
    f = NULL;
    if (!st) st = sc_calib_finalize(c, err);
done:
    free(teacher);
    sc_forward_free(f);
    sc_router_free(x.student);
    if (st) {
        sc_calib_free(c);
        return st;
    }
    *out = c;
    return SC_OK;
}

sc_status sc_calib_finalize(sc_calib *c, sc_err *err) {
    for (int i = 0; i < c->n_entries; i++) SC_TRY(c->entries[i].method->finalize(c->entries[i].state, err));
    return SC_OK;
}

/* ---- merge ---- */

/* Shards "i/n,..." of both sides must share n and be disjoint. */
static bool shards_compatible(const char *a, const char *b, char *why, size_t cap) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s,%s", a, b);
    long long n0 = -1;
    long long seen[512];
    int ns = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long i, n;
        if (sscanf(tok, "%lld/%lld", &i, &n) != 2 || n < 1 || i < 0 || i >= n) {
            snprintf(why, cap, "bad shard '%s'", tok);
            return false;
        }
        if (n0 >= 0 && n != n0) {
            snprintf(why, cap, "shards of different splits (%lld vs %lld parts) cannot be combined", n0, n);
            return false;
        }
        n0 = n;
        for (int k = 0; k < ns; k++)
            if (seen[k] == i) {
                snprintf(why, cap, "shard %lld/%lld is already included; it would be counted twice", i, n);
                return false;
            }
        if (ns < 512) seen[ns++] = i;
    }
    return true;
}

static bool sums_finite(const sc_array *a, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(a->type == SC_ARR_F64 ? ((const double *)a->data)[j] : (double)((const float *)a->data)[j]))
            return false;
    return true;
}

sc_status sc_calib_merge(sc_calib *dst, const sc_calib *src, sc_err *err) {
    if (strcmp(dst->model_id, src->model_id) != 0)
        return sc_errf(err, SC_EARG, "a calibration of another model (model id %s vs %s)", src->model_id, dst->model_id);
    char why[512];
    if (strcmp(dst->options, src->options) != 0) {
        sc_calib_options_diff(src->options, dst->options, why, sizeof why);
        return sc_errf(err, SC_EARG, "computed with other options: %s", why);
    }
    if (strcmp(dst->data_id, src->data_id) != 0)
        return sc_errf(err, SC_EARG, "computed on other data (data id %s vs %s): another text, or other --max-docs, "
                       "--skip-docs, --seed or --pack", src->data_id, dst->data_id);
    if (!shards_compatible(dst->shards, src->shards, why, sizeof why))
        return sc_errf(err, SC_EARG, "%s (have %s, adding %s)", why, dst->shards, src->shards);
    if (dst->n_entries != src->n_entries) return sc_errf(err, SC_EARG, "computed with other methods");
    sc_array *a = malloc(2 * SC_MAX_ARRAYS * sizeof *a), *b = a + SC_MAX_ARRAYS;
    if (!a) return sc_errf(err, SC_ENOMEM, "out of memory");
    sc_status st = SC_OK;
    for (int i = 0; i < dst->n_entries && !st; i++) {
        const sc_method *me = dst->entries[i].method;
        if (me != src->entries[i].method) {
            st = sc_errf(err, SC_EARG, "computed with other methods");
            break;
        }
        int na = me->arrays(dst->entries[i].state, a, SC_MAX_ARRAYS), nb = me->arrays(src->entries[i].state, b, SC_MAX_ARRAYS);
        if (na != nb) {
            st = sc_errf(err, SC_EARG, "%s: different array lists", me->name);
            break;
        }
        for (int k = 0; k < na; k++) {
            bool concat = a[k].kind == SC_ARR_CONCAT;
            if ((!a[k].data || !b[k].data) && a[k].kind == SC_ARR_SUM) { /* a state opened for reading */
                st = sc_errf(err, SC_EARG, "%s: array %s is not in memory (load the files with sc_calib_load)",
                             me->name, a[k].name);
                break;
            }
            if (strcmp(a[k].name, b[k].name) || a[k].kind != b[k].kind || (!concat && a[k].shape[0] != b[k].shape[0]) ||
                a[k].shape[1] != b[k].shape[1] || a[k].type != b[k].type) {
                st = sc_errf(err, SC_EARG, "%s: array %s differs in shape", me->name, a[k].name);
                break;
            }
            if (concat) { /* stored samples: append src's rows after dst's */
                int64_t r0 = a[k].shape[0], rb = b[k].shape[0], cols = a[k].shape[1] ? a[k].shape[1] : 1;
                size_t esz = a[k].type == SC_ARR_F32 ? 4 : 8;
                if (rb > INT64_MAX / 2 - r0) {
                    st = sc_errf(err, SC_ENOMEM, "%s: array %s is too long", me->name, a[k].name);
                    break;
                }
                if (rb == 0) continue;
                if ((st = sc_array_concat_resize(&a[k], r0 + rb, err))) break;
                memcpy((char *)a[k].data + (size_t)(r0 * cols) * esz, b[k].data, (size_t)(rb * cols) * esz);
                continue;
            }
            if (a[k].kind != SC_ARR_SUM) continue;
            int64_t n = a[k].shape[0] * (a[k].shape[1] ? a[k].shape[1] : 1);
            if (a[k].type == SC_ARR_I64) { /* counts: checked, so that no sum of shards wraps */
                int64_t *x = a[k].data;
                const int64_t *y = b[k].data;
                for (int64_t j = 0; j < n && !st; j++)
                    if (y[j] < 0 || x[j] < 0 || __builtin_add_overflow(x[j], y[j], &x[j]) || x[j] > SC_COUNT_MAX)
                        st = sc_errf(err, SC_ERANGE, "%s: array %s: counts overflow (more than 2^62)", me->name,
                                     a[k].name);
                if (st) break;
            } else if (a[k].type == SC_ARR_F64) {
                for (int64_t j = 0; j < n; j++) ((double *)a[k].data)[j] += ((const double *)b[k].data)[j];
            } else {
                for (int64_t j = 0; j < n; j++) ((float *)a[k].data)[j] += ((const float *)b[k].data)[j];
            }
            if (a[k].type != SC_ARR_I64 && !sums_finite(&a[k], n)) {
                st = sc_errf(err, SC_ERANGE, "%s: array %s: the sum overflows to infinity", me->name, a[k].name);
                break;
            }
        }
    }
    free(a);
    if (st) return st;
    if (src->n_seqs < 0 || src->n_tokens < 0 || dst->n_seqs > INT64_MAX / 2 - src->n_seqs ||
        dst->n_tokens > INT64_MAX / 2 - src->n_tokens)
        return sc_errf(err, SC_ERANGE, "the sequence or token counts overflow");
    size_t used = strlen(dst->shards);
    snprintf(dst->shards + used, sizeof dst->shards - used, ",%s", src->shards);
    dst->n_seqs += src->n_seqs;
    dst->n_tokens += src->n_tokens;
    dst->seconds += src->seconds;
    return sc_calib_finalize(dst, err);
}
