/* filekind.c - see filekind.h. */
#include "filekind.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"

enum { SNIFF = 4096 };

typedef struct sniffed {
    uint8_t b[SNIFF];
    size_t n;      /* bytes read (at most SNIFF) */
    uint64_t size; /* the file's size */
} sniffed;

/* header of int32 sizes, as the llama2.c checkpoint reader reads them: dim,
 * hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: untied
 * classifier), seq_len; all in the loaders' bounds and consistent */
static bool is_llama2c(const sniffed *s) {
    if (s->n < 28) return false;
    int64_t v[7];
    for (int i = 0; i < 7; i++) v[i] = (int32_t)sc_le32(s->b + 4 * i);
    int64_t vocab = v[5] < 0 ? -v[5] : v[5];
    return v[0] >= 1 && v[0] <= SC_MAX_DIM && v[1] >= 1 && v[1] <= SC_MAX_FFN && v[2] >= 1 &&
           v[2] <= SC_MAX_LAYERS && v[3] >= 1 && v[3] <= SC_MAX_HEADS && v[4] >= 1 && v[4] <= v[3] &&
           v[0] % v[3] == 0 && v[3] % v[4] == 0 && vocab >= 1 && vocab <= SC_MAX_VOCAB && v[6] >= 1 &&
           v[6] <= SC_MAX_SEQ;
}

/* int32 max_token_length in [1, 65536], then records {f32 score, int32 len,
 * len bytes}: every record within the bytes read must chain (a finite score,
 * zero or normal; 0 <= len <= max_token_length), and when the whole file was
 * read the last one must end at its end. A max_token_length of 10 starts the
 * file with 0x0A, as a protobuf does: this is what tells them apart. */
static bool is_tokbin(const sniffed *s) {
    if (s->n < 12) return false;
    uint32_t max_len = sc_le32(s->b);
    if (max_len < 1 || max_len > 65536) return false;
    size_t off = 4, records = 0;
    while (s->n - off >= 8) {
        float score = sc_lef32(s->b + off);
        uint32_t len = sc_le32(s->b + off + 4);
        if (!isfinite(score) || (score != 0.0f && !isnormal(score)) || len > max_len) return false;
        off += 8;
        if (len > s->n - off) return s->n < s->size && records > 0; /* runs past what was read */
        off += len;
        records++;
    }
    return records > 0 && (s->n < s->size || off == s->n);
}

/* varint at *p (at most 5 bytes, below 2^32); false when malformed */
static bool varint(const uint8_t *b, size_t n, size_t *p, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 5 && *p < n; i++) {
        uint8_t c = b[(*p)++];
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* ModelProto: field 1 (repeated SentencePiece, wire type 2: 0x0A), its
 * length, and the piece message: its field 1 (the piece string, 0x0A), then
 * the end of the message, field 2 (score, fixed32: 0x15) or 3 (type, varint:
 * 0x18). A text file that starts with a blank line has 0x0A first too. */
static bool is_sp_model(const sniffed *s) {
    size_t p = 1, q;
    uint64_t len, plen;
    if (s->n < 4 || s->b[0] != 0x0A || !varint(s->b, s->n, &p, &len) || len < 2 || len > s->size - p) return false;
    size_t end = p + (size_t)len;
    if (p >= s->n || s->b[p] != 0x0A) return false;
    q = p + 1;
    if (!varint(s->b, s->n, &q, &plen) || q > end || plen > end - q) return false;
    q += (size_t)plen;
    return q == end || (q < s->n && (s->b[q] == 0x15 || s->b[q] == 0x18));
}

/* u64 header length, the header a JSON object within the file */
static bool is_safetensors(const sniffed *s) {
    if (s->n < 10) return false;
    uint64_t h = sc_le64(s->b);
    return h >= 2 && h <= s->size - 8 && s->b[8] == '{';
}

static size_t skip_ws(const sniffed *s) {
    size_t i = 0;
    while (i < s->n && (s->b[i] == ' ' || s->b[i] == '\t' || s->b[i] == '\r' || s->b[i] == '\n')) i++;
    if (i + 3 <= s->n && s->b[i] == 0xEF && s->b[i + 1] == 0xBB && s->b[i + 2] == 0xBF) i += 3; /* BOM */
    return i;
}

/* UTF-8 (a sequence cut by the end of what was read counts as valid) without
 * NUL or control characters but tab, LF, FF, CR */
static bool is_text(const sniffed *s) {
    size_t i = 0;
    while (i < s->n) {
        uint8_t c = s->b[i];
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\f' && c != '\r') return false;
            if (c == 0x7f) return false;
            i++;
            continue;
        }
        size_t k = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : 0;
        if (!k || c > 0xF4) return false;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= s->n) return s->n < s->size;
            if ((s->b[i + j] & 0xC0) != 0x80) return false;
        }
        i += k + 1;
    }
    return true;
}

sc_filekind sc_file_kind(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0) return SC_FILE_UNREADABLE;
    if (S_ISDIR(st.st_mode)) return SC_FILE_DIR;
    if (!S_ISREG(st.st_mode)) return SC_FILE_UNKNOWN; /* a pipe or device: reading would consume what the reader needs */
    FILE *f = fopen(path, "rb");
    if (!f) return SC_FILE_UNREADABLE;
    static const sniffed zero;
    sniffed s = zero;
    s.n = fread(s.b, 1, sizeof s.b, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) return SC_FILE_UNREADABLE;
    s.size = (uint64_t)st.st_size >= s.n ? (uint64_t)st.st_size : s.n;
    if (s.n == 0) return SC_FILE_EMPTY;
    if (s.n >= 4 && memcmp(s.b, "GGUF", 4) == 0) return SC_FILE_GGUF;
    if (s.n >= 8 && memcmp(s.b, "SPARSCAL", 8) == 0) return SC_FILE_SCAL;
    if (s.n >= 8 && memcmp(s.b, "SPARSPAK", 8) == 0) return SC_FILE_SPK;
    if (is_safetensors(&s)) return SC_FILE_SAFETENSORS;
    if (is_llama2c(&s)) return SC_FILE_LLAMA2C;
    if (is_tokbin(&s)) return SC_FILE_TOKBIN;
    if (is_sp_model(&s)) return SC_FILE_SP_MODEL;
    size_t i = skip_ws(&s);
    if (i < s.n && (s.b[i] == '{' || s.b[i] == '[')) return SC_FILE_JSON;
    if (is_text(&s)) return SC_FILE_TEXT;
    return SC_FILE_UNKNOWN;
}

const char *sc_file_kind_desc(sc_filekind k) {
    static const char *const desc[SC_FILE_KIND_COUNT] = {
        [SC_FILE_UNREADABLE] = "an unreadable file",
        [SC_FILE_DIR] = "a directory",
        [SC_FILE_EMPTY] = "an empty file",
        [SC_FILE_GGUF] = "a GGUF model (-m)",
        [SC_FILE_SCAL] = "a sparsecal calibration file (--calib)",
        [SC_FILE_SPK] = "a sparsecal packed artifact (-m, run --artifact)",
        [SC_FILE_SAFETENSORS] = "a safetensors file (-m: its Hugging Face directory)",
        [SC_FILE_LLAMA2C] = "a llama2.c checkpoint (-m)",
        [SC_FILE_TOKBIN] = "a llama2.c tokenizer.bin (--tokenizer)",
        [SC_FILE_SP_MODEL] = "a SentencePiece tokenizer.model (--tokenizer)",
        [SC_FILE_JSON] = "a JSON file",
        [SC_FILE_TEXT] = "a text file (-f)",
        [SC_FILE_UNKNOWN] = "a file of unknown format",
    };
    return (unsigned)k < SC_FILE_KIND_COUNT ? desc[k] : "a file of unknown format";
}

bool sc_file_kind_ok(const char *path, sc_filekind k, unsigned accept, const char *what, sc_err *err) {
    if (k == SC_FILE_UNKNOWN || k == SC_FILE_UNREADABLE || (accept & SC_FILE_BIT(k))) return true;
    sc_errf(err, SC_EARG, "%s is %s, not %s", path, sc_file_kind_desc(k), what);
    return false;
}

sc_status sc_file_expect(const char *path, unsigned accept, const char *what, sc_err *err) {
    return sc_file_kind_ok(path, sc_file_kind(path), accept, what, err) ? SC_OK : SC_EARG;
}

sc_status sc_container_error(const char *path, srt_ct_kind kind, srt_ct_status cs, const char *msg, sc_err *err) {
    unsigned accept = kind == SRT_CT_SCAL ? SC_FILE_BIT(SC_FILE_SCAL)
                      : kind == SRT_CT_SPAK ? SC_FILE_BIT(SC_FILE_SPK)
                                            : SC_FILE_BIT(SC_FILE_SCAL) | SC_FILE_BIT(SC_FILE_SPK);
    const char *what = kind == SRT_CT_SCAL ? "a calibration file"
                       : kind == SRT_CT_SPAK ? "a packed artifact"
                                             : "a sparsecal file (.scal or .spk)";
    if (cs != SRT_CT_EIO && sc_file_expect(path, accept, what, err)) return SC_EARG;
    sc_status st = cs == SRT_CT_EIO ? SC_EIO : cs == SRT_CT_ENOMEM ? SC_ENOMEM : cs == SRT_CT_EARG ? SC_EARG
                   : cs == SRT_CT_EUNSUPPORTED ? SC_EUNSUPPORTED : SC_EFORMAT;
    return sc_errf(err, st, "%s", msg);
}

sc_status sc_container_open(const char *path, srt_ct_kind kind, srt_container **out, sc_err *err) {
    char msg[sizeof err->msg] = "";
    srt_ct_status cs = srt_container_open(path, kind, out, msg, sizeof msg);
    return cs == SRT_CT_OK ? SC_OK : sc_container_error(path, kind, cs, msg, err);
}
