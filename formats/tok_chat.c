/* tok_chat.c - chat conversations rendered in a model family's format.
 *
 * The four formats are written out by hand from the families' published
 * templates (Jinja is out of scope): the rendered text carries the special
 * tokens as text and is encoded with special-token parsing, as Hugging
 * Face's apply_chat_template(tokenize=True) does. No generation prompt is
 * added: calibration conversations are complete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "tok_internal.h"

static const char *const NAMES[] = {"auto", "llama3", "gemma", "chatml", "mistral"};

const char *sc_chat_name(sc_chat_format f) {
    return (int)f >= 0 && (size_t)f < sizeof NAMES / sizeof NAMES[0] ? NAMES[f] : "?";
}

sc_status sc_chat_parse(const char *s, sc_chat_format *out, sc_err *err) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (strcmp(s, NAMES[i]) == 0) {
            *out = (sc_chat_format)i;
            return SC_OK;
        }
    if (strcmp(s, "qwen") == 0 || strcmp(s, "qwen2") == 0) {
        *out = SC_CHAT_CHATML;
        return SC_OK;
    }
    return sc_errf(err, SC_EARG, "--chat-format '%s' is not one of auto, llama3, gemma, chatml (qwen), mistral", s);
}

sc_chat_format sc_chat_detect(const char *tmpl) {
    if (!tmpl) return SC_CHAT_AUTO;
    if (strstr(tmpl, "<|start_header_id|>")) return SC_CHAT_LLAMA3;
    if (strstr(tmpl, "<start_of_turn>")) return SC_CHAT_GEMMA;
    if (strstr(tmpl, "<|im_start|>")) return SC_CHAT_CHATML;
    if (strstr(tmpl, "[INST]")) return SC_CHAT_MISTRAL;
    return SC_CHAT_AUTO;
}

static bool put(tok_buf *b, const char *s) { return tok_buf_put(b, s, strlen(s)); }

/* Content without leading/trailing whitespace (Jinja's | trim). */
static void trim(const char **s, size_t *n) {
    while (*n > 0 && (**s == ' ' || **s == '\n' || **s == '\t' || **s == '\r')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\n' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r')) (*n)--;
}

static bool role_is(const sc_chat_msg *m, const char *r) { return strcmp(m->role, r) == 0; }

sc_status sc_chat_render(sc_chat_format f, const sc_chat_msg *msgs, size_t n, char **out, size_t *len, sc_err *err) {
    tok_buf b = {0};
    bool ok = true;
    size_t first = 0;
    const sc_chat_msg *sys = NULL;
    if ((f == SC_CHAT_GEMMA || f == SC_CHAT_MISTRAL) && n > 0 && role_is(&msgs[0], "system")) {
        sys = &msgs[0]; /* folded into the first user turn */
        first = 1;
    }
    for (size_t i = first; ok && i < n; i++) {
        const sc_chat_msg *m = &msgs[i];
        const char *c = m->content;
        size_t cn = m->content_len;
        switch (f) {
        case SC_CHAT_LLAMA3:
            trim(&c, &cn);
            ok = put(&b, "<|start_header_id|>") && put(&b, m->role) && put(&b, "<|end_header_id|>\n\n") &&
                 tok_buf_put(&b, c, cn) && put(&b, "<|eot_id|>");
            break;
        case SC_CHAT_GEMMA: {
            trim(&c, &cn);
            const char *role = role_is(m, "assistant") ? "model" : m->role;
            ok = put(&b, "<start_of_turn>") && put(&b, role) && put(&b, "\n");
            if (ok && sys && i == first) {
                const char *sc = sys->content;
                size_t sn = sys->content_len;
                ok = tok_buf_put(&b, sc, sn) && put(&b, "\n\n");
            }
            ok = ok && tok_buf_put(&b, c, cn) && put(&b, "<end_of_turn>\n");
            break;
        }
        case SC_CHAT_CHATML:
            ok = put(&b, "<|im_start|>") && put(&b, m->role) && put(&b, "\n") && tok_buf_put(&b, c, cn) &&
                 put(&b, "<|im_end|>\n");
            break;
        case SC_CHAT_MISTRAL:
            if (role_is(m, "user")) {
                ok = put(&b, "[INST] ");
                if (ok && sys && i == first) ok = tok_buf_put(&b, sys->content, sys->content_len) && put(&b, "\n\n");
                ok = ok && tok_buf_put(&b, c, cn) && put(&b, " [/INST]");
            } else if (role_is(m, "assistant")) {
                ok = tok_buf_put(&b, c, cn) && put(&b, "</s>");
            } else {
                free(b.p);
                return sc_errf(err, SC_EFORMAT, "message %zu: role '%.32s' has no place in the mistral format "
                               "(user, assistant, and a first system message)", i, m->role);
            }
            break;
        default:
            free(b.p);
            return sc_errf(err, SC_EARG, "chat data needs a chat format (--chat-format llama3|gemma|chatml|mistral)");
        }
    }
    if (!ok || !tok_buf_reserve(&b, 1)) {
        free(b.p);
        return sc_errf(err, SC_ENOMEM, "chat: out of memory");
    }
    b.p[b.n] = '\0';
    *out = b.p;
    *len = b.n;
    return SC_OK;
}
