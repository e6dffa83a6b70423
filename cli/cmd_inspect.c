/* cmd_inspect.c - `sparsecal inspect` (summarise a .scal or .spk container)
 * and `sparsecal verify` (check every checksum and invariant). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtype.h"
#include "filekind.h"
#include "scal.h"
#include "srt_container.h"
#include "srt_model.h"

/* the runtime's status codes are numbered like the toolchain's */
_Static_assert((int)SRT_CT_EIO == (int)SC_EIO && (int)SRT_CT_EFORMAT == (int)SC_EFORMAT &&
                   (int)SRT_CT_ENOMEM == (int)SC_ENOMEM && (int)SRT_CT_EARG == (int)SC_EARG &&
                   (int)SRT_CT_EUNSUPPORTED == (int)SC_EUNSUPPORTED,
               "srt_ct_status and sc_status must agree");


/* Prints s as a JSON string literal. */
static void put_json_str(const char *s) {
    char *q = srt_json_quote(s, strlen(s), NULL);
    fputs(q ? q : "\"\"", stdout);
    free(q);
}

static const char *human(uint64_t n, char *buf, size_t cap) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%" PRIu64 " B", n);
    else snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

static double ratio(const srt_ct_section *s) {
    return s->stored_size ? (double)s->raw_size / (double)s->stored_size : 1.0;
}

/* ---- per-section statistics (--stats) ---- */

typedef struct stats {
    bool ok;
    double min, max, sum;
    uint64_t n, nonfinite, zeros;
} stats;

static double element(srt_ct_dtype t, const uint8_t *p, uint64_t i) {
    const uint8_t *q;
    switch (t) {
    case SRT_CT_U8: return p[i];
    case SRT_CT_I8: return (int8_t)p[i];
    case SRT_CT_U16: return sc_le16(p + 2 * i);
    case SRT_CT_I16: return (int16_t)sc_le16(p + 2 * i);
    case SRT_CT_F16: return sc_f16_to_f32(sc_le16(p + 2 * i));
    case SRT_CT_BF16: return sc_bf16_to_f32(sc_le16(p + 2 * i));
    case SRT_CT_I32: return (int32_t)sc_le32(p + 4 * i);
    case SRT_CT_U32: return sc_le32(p + 4 * i);
    case SRT_CT_F32: return sc_lef32(p + 4 * i);
    case SRT_CT_I64: return (double)(int64_t)sc_le64(p + 8 * i);
    case SRT_CT_U64: return (double)sc_le64(p + 8 * i);
    case SRT_CT_F64: {
        q = p + 8 * i;
        uint64_t u = sc_le64(q);
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    default: return 0.0;
    }
}

/* Section i's decompressed bytes in a buffer of its own (the caller frees it): the handle's cache would keep
 * every decompressed section (a Llama-3-8B LaRoSA calibration holds 12 GiB of them). */
static srt_ct_status read_section(srt_container *c, size_t i, void **out) {
    const srt_ct_section *s = srt_container_section_at(c, i);
    void *data = malloc(s->raw_size ? (size_t)s->raw_size : 1);
    if (!data) return SRT_CT_ENOMEM;
    srt_ct_status st = srt_container_read(c, i, data, s->raw_size);
    if (st) {
        free(data);
        return st;
    }
    *out = data;
    return SRT_CT_OK;
}

static srt_ct_status section_stats(srt_container *c, size_t i, stats *out) {
    memset(out, 0, sizeof *out);
    const srt_ct_section *s = srt_container_section_at(c, i);
    if (s->dtype == SRT_CT_BYTES) return SRT_CT_OK;
    void *data;
    srt_ct_status st = read_section(c, i, &data);
    if (st) return st;
    out->ok = true;
    out->min = INFINITY;
    out->max = -INFINITY;
    for (uint64_t k = 0; k < s->n_elements; k++) {
        double v = element(s->dtype, data, k);
        if (!isfinite(v)) {
            out->nonfinite++;
            continue;
        }
        if (v == 0.0) out->zeros++;
        if (v < out->min) out->min = v;
        if (v > out->max) out->max = v;
        out->sum += v;
        out->n++;
    }
    free(data);
    return SRT_CT_OK;
}

/* --values: a section's elements as a JSON array, row-major, each printed so it reads back exactly
 * (integers whole, f64 in 17 significant digits, narrower floats in 9; a non-finite value is null). */
static srt_ct_status print_values(srt_container *c, size_t i) {
    const srt_ct_section *s = srt_container_section_at(c, i);
    void *data;
    srt_ct_status st = read_section(c, i, &data);
    if (st) return st;
    const uint8_t *p = data;
    printf(",\"values\":[");
    for (uint64_t k = 0; k < s->n_elements; k++) {
        if (k) putchar(',');
        if (s->dtype == SRT_CT_U64) {
            printf("%" PRIu64, sc_le64(p + 8 * k));
        } else if (s->dtype == SRT_CT_I64) {
            printf("%" PRId64, (int64_t)sc_le64(p + 8 * k));
        } else {
            srt_ct_dtype t = s->dtype == SRT_CT_BYTES ? SRT_CT_U8 : s->dtype;
            double v = element(t, p, k); /* exact for every remaining type */
            if (t != SRT_CT_F16 && t != SRT_CT_BF16 && t != SRT_CT_F32 && t != SRT_CT_F64) printf("%.0f", v);
            else if (!isfinite(v)) printf("null");
            else printf(t == SRT_CT_F64 ? "%.17g" : "%.9g", v);
        }
    }
    printf("]");
    free(data);
    return SRT_CT_OK;
}

/* ---- inspect ---- */

static void print_text(srt_container *c, bool want_stats) {
    const char *path = srt_container_path(c);
    uint32_t vmaj, vmin;
    srt_container_version(c, &vmaj, &vmin);
    size_t n = srt_container_section_count(c), mlen;
    char b1[32], b2[32], shape[160];
    srt_ct_kind kind = srt_container_kind(c);
    printf("file      %s\n", path);
    printf("kind      %s file (%s), format %u.%u, %s (%" PRIu64 " bytes)\n", srt_ct_kind_name(kind),
           srt_ct_kind_magic(kind), vmaj, vmin, human(srt_container_file_size(c), b1, sizeof b1),
           srt_container_file_size(c));
    srt_container_manifest_text(c, &mlen);
    printf("manifest  %zu bytes\n", mlen);
    char *m = srt_json_print(srt_container_manifest(c), 2, NULL);
    if (m) {
        for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n")) printf("  %s\n", line);
        free(m);
    }
    uint64_t raw = 0, stored = 0;
    size_t name_w = 4;
    for (size_t i = 0; i < n; i++) {
        const srt_ct_section *s = srt_container_section_at(c, i);
        raw += s->raw_size;
        stored += s->stored_size;
        if (strlen(s->name) > name_w) name_w = strlen(s->name);
    }
    printf("sections  %zu: %s raw, %s stored", n, human(raw, b1, sizeof b1), human(stored, b2, sizeof b2));
    if (stored) printf(" (%.2fx)", (double)raw / (double)stored);
    printf("\n");
    if (n) printf("  %-*s  %-5s  %-18s  %12s  %12s  %s\n", (int)name_w, "name", "dtype", "shape", "raw", "stored",
                  "compression");
    for (size_t i = 0; i < n; i++) {
        const srt_ct_section *s = srt_container_section_at(c, i);
        size_t k = (size_t)snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < s->ndim && k < sizeof shape; d++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRIu64, d ? "x" : "", s->dims[d]);
        if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
        printf("  %-*s  %-5s  %-18s  %12s  %12s  ", (int)name_w, s->name, srt_ct_dtype_name(s->dtype), shape,
               human(s->raw_size, b1, sizeof b1), human(s->stored_size, b2, sizeof b2));
        if (s->compression == SRT_CT_ZSTD) printf("zstd %.2fx\n", ratio(s));
        else printf("none\n");
        if (!want_stats) continue;
        stats t;
        if (section_stats(c, i, &t) != SRT_CT_OK) {
            printf("  %-*s  error: %s\n", (int)name_w, "", srt_container_errmsg(c));
        } else if (t.ok && t.n) {
            printf("  %-*s  min %.6g  max %.6g  mean %.6g  zeros %" PRIu64 "%s", (int)name_w, "", t.min, t.max,
                   t.sum / (double)t.n, t.zeros, t.nonfinite ? "" : "\n");
            if (t.nonfinite) printf("  non-finite %" PRIu64 "\n", t.nonfinite);
        }
    }
}

static void print_json(srt_container *c, bool want_stats, bool want_values) {
    uint32_t vmaj, vmin;
    srt_container_version(c, &vmaj, &vmin);
    size_t n = srt_container_section_count(c);
    srt_ct_kind kind = srt_container_kind(c);
    uint64_t raw = 0, stored = 0;
    printf("{\"file\":");
    put_json_str(srt_container_path(c));
    printf(",\"kind\":\"%s\",\"magic\":\"%s\",\"version\":\"%u.%u\",\"file_size\":%" PRIu64, srt_ct_kind_name(kind),
           srt_ct_kind_magic(kind), vmaj, vmin, srt_container_file_size(c));
    char *m = srt_json_print(srt_container_manifest(c), 0, NULL);
    printf(",\"manifest\":%s,\"sections\":[", m ? m : "null");
    free(m);
    for (size_t i = 0; i < n; i++) {
        const srt_ct_section *s = srt_container_section_at(c, i);
        raw += s->raw_size;
        stored += s->stored_size;
        printf("%s{\"name\":", i ? "," : "");
        put_json_str(s->name);
        printf(",\"dtype\":\"%s\",\"shape\":[", srt_ct_dtype_name(s->dtype));
        for (uint32_t d = 0; d < s->ndim; d++) printf("%s%" PRIu64, d ? "," : "", s->dims[d]);
        printf("],\"elements\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"raw_size\":%" PRIu64 ",\"stored_size\":%" PRIu64
               ",\"compression\":\"%s\",\"ratio\":%.6g,\"checksum\":\"%016" PRIx64 "\"",
               s->n_elements, s->offset, s->raw_size, s->stored_size, s->compression == SRT_CT_ZSTD ? "zstd" : "none",
               ratio(s), s->checksum);
        if (want_stats) {
            stats t;
            if (section_stats(c, i, &t) != SRT_CT_OK) {
                printf(",\"error\":");
                put_json_str(srt_container_errmsg(c));
            } else if (t.ok) {
                printf(",\"stats\":{\"finite\":%" PRIu64 ",\"nonfinite\":%" PRIu64 ",\"zeros\":%" PRIu64, t.n,
                       t.nonfinite, t.zeros);
                if (t.n) printf(",\"min\":%.17g,\"max\":%.17g,\"mean\":%.17g", t.min, t.max, t.sum / (double)t.n);
                printf("}");
            }
        }
        if (want_values && print_values(c, i) != SRT_CT_OK) {
            printf(",\"error\":");
            put_json_str(srt_container_errmsg(c));
        }
        printf("}");
    }
    printf("],\"raw_bytes\":%" PRIu64 ",\"stored_bytes\":%" PRIu64 "}\n", raw, stored);
}

int cmd_inspect(int argc, char **argv) {
    bool json = false, want_stats = false, want_values = false;
    const sc_opt opts[] = {
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object (the manifest embedded as JSON)", 0, 0},
        {"stats", 0, SC_ARG_FLAG, &want_stats, NULL, "min/max/mean/zeros of every numeric section (reads the data)",
         0, 0},
        {"values", 0, SC_ARG_FLAG, &want_values, NULL,
         "with --json: every section's elements, row-major, as numbers that read back exactly (null: non-finite)",
         0, 0},
        SC_OPTS_END("  sparsecal inspect c.scal\n"
"  sparsecal inspect m.spk --json --stats"),
    };
    const char *pos[1];
    int n_pos = 0;
    int r = sc_parse_args("inspect",
                          "Summarise a calibration file (.scal) or an artifact (.spk): kind, format version, manifest,\n"
                          "and every section's dtype, shape, sizes and compression. Usage: sparsecal inspect FILE",
                          opts, argc, argv, pos, 1, &n_pos);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    if (n_pos != 1) {
        fprintf(stderr, "sparsecal inspect: expected one FILE (see --help)\n");
        return 2;
    }
    sc_err err = {{0}};
    if (want_values && !json) {
        sc_errf(&err, SC_EARG, "--values prints the elements into the --json output: add --json");
        return cli_fail("inspect", SC_EARG, &err);
    }
    srt_container *c = NULL;
    sc_status st = sc_container_open(pos[0], SRT_CT_ANY, &c, &err);
    if (st) return cli_fail("inspect", st, &err);
    if (json) print_json(c, want_stats, want_values);
    else print_text(c, want_stats);
    srt_container_close(c);
    return 0;
}

/* ---- verify ---- */

int cmd_verify(int argc, char **argv) {
    bool json = false, quiet = false;
    const sc_opt opts[] = {
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "print nothing on success", 0, 0},
        SC_OPTS_END("  sparsecal verify m.spk\n"
"  sparsecal verify c.scal --json"),
    };
    const char *pos[1];
    int n_pos = 0;
    int r = sc_parse_args("verify",
                          "Check every checksum, offset, shape and size invariant of a .scal or .spk file, and that\n"
                          "every zstd section decompresses to its declared size. Exit status 0 only when all hold.\n"
                          "Usage: sparsecal verify FILE",
                          opts, argc, argv, pos, 1, &n_pos);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    if (n_pos != 1) {
        fprintf(stderr, "sparsecal verify: expected one FILE (see --help)\n");
        return 2;
    }
    const char *path = pos[0];
    sc_err err = {{0}};
    srt_container *c = NULL;
    sc_status st = sc_container_open(path, SRT_CT_ANY, &c, &err);
    if (st) {
        if (!json) return cli_fail("verify", st, &err);
        printf("{\"file\":");
        put_json_str(path);
        printf(",\"ok\":false,\"errors\":[");
        put_json_str(err.msg);
        printf("]}\n");
        return cli_exit_code(st);
    }
    size_t n = srt_container_section_count(c), n_bad = 0;
    uint64_t bytes = 0;
    if (json) {
        printf("{\"file\":");
        put_json_str(path);
        printf(",\"kind\":\"%s\",\"errors\":[", srt_ct_kind_name(srt_container_kind(c)));
    }
    for (size_t i = 0; i < n; i++) {
        const srt_ct_section *s = srt_container_section_at(c, i);
        bytes += s->stored_size;
        if (srt_container_verify_section(c, i) == SRT_CT_OK) continue;
        if (json) {
            printf("%s", n_bad ? "," : "");
            put_json_str(srt_container_errmsg(c));
        } else {
            fprintf(stderr, "sparsecal verify: %s\n", srt_container_errmsg(c));
        }
        n_bad++;
    }
    /* what the file says, not only that its bytes are intact: a sparsecal calibration's numbers are
       range-checked as its loader checks them, an artifact's config and tensor table as the runtime opens it */
    const char *declared = srt_json_str(srt_json_get(srt_container_manifest(c), "format"), "");
    bool is_calib = !strcmp(declared, "sparsecal-calibration"), is_artifact = !strcmp(declared, "sparsecal-artifact");
    if (!n_bad && (is_calib || is_artifact)) { /* other containers: the structure is all there is to check */
        char msg[sizeof err.msg] = "";
        if (is_calib) {
            sc_calib *cal = NULL;
            sc_err e = {{0}};
            if (sc_calib_load(path, NULL, &cal, &e)) snprintf(msg, sizeof msg, "%s", e.msg);
            sc_calib_free(cal);
        } else {
            srt_ctx *ctx = NULL;
            srt_model *m = NULL;
            srt_model_opts mo = {1, NULL, SRT_KV_F32}; /* one position: the cache is not what is checked */
            sc_err ce;
            if (cli_ctx_create(&ctx, SRT_ISA_SCALAR, 1, &ce) != SC_OK) {
                snprintf(msg, sizeof msg, "%s", ce.msg);
            } else {
                mo.ctx = ctx;
                if (srt_model_open(path, &mo, &m, msg, sizeof msg) == SRT_CT_OK) msg[0] = '\0';
            }
            srt_model_close(m);
            srt_ctx_free(ctx);
        }
        if (msg[0]) {
            if (json)
                put_json_str(msg);
            else
                fprintf(stderr, "sparsecal verify: %s\n", msg);
            n_bad++;
        }
    }
    if (json) {
        printf("],\"ok\":%s,\"sections\":%zu,\"bad_sections\":%zu,\"bytes_checked\":%" PRIu64 "}\n",
               n_bad ? "false" : "true", n, n_bad, bytes);
    } else if (!n_bad && !quiet) {
        char b[32];
        printf("%s: ok (%s file, %zu sections, %s of section data checked)\n", path,
               srt_ct_kind_name(srt_container_kind(c)), n, human(bytes, b, sizeof b));
    }
    srt_container_close(c);
    return n_bad ? 1 : 0;
}
