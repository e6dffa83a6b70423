/* x86_kmi8_body.h - the kmi8 (neuron-major int8, q8_0 values) kernel for x86, one body compiled per
 * ISA after x86_kmi4_body.h, whose vector operations it uses; the includer adds
 *   K8_INIT(S)         a fresh int32 accumulator for a K-block whose live activations sum to S
 *   K8_DOT(acc, q, a)  acc += the four-byte dots of q (signed weights) and a (signed activations)
 * (AVX-512: the sign bit flipped, vpdpbusd from -128 S; AVX2: |w| times a with w's sign, vpmaddubsw
 * and vpmaddwd, from 0).
 *
 * Live neurons four at a time (a quad) within a K-block, as kmi4: two rounds of byte/word unpacks
 * of the quad's four 64-byte tiles put the quad's bytes of output 64t + 16m + VB/4 h + lane in lane
 * `lane` of q_m (half h of the tile), and the dot with the quad's four activations accumulates them.
 * A pass covers K8_CHUNK tiles (2048 outputs), its int32 sums in L1; each quad's tile loads prefetch
 * the same tile of the quads K8_AHEAD ahead into L1 and K8_FAR ahead into L2, and a K-block's start
 * the next K-block's scales for the pass. At a K-block's end the sums times s[o] d_h[kb] go into the
 * float outputs, K-block after K-block as ref_kmi8 adds them. */

#define K8_CHUNK 32
#define K8_AHEAD 2
#define K8_FAR 8

/* The column of the neuron at list position p (clamped to the list). */
static inline const uint8_t *SRT_SFX(k8_vec)(const srt_kd_job *j, int64_t p, int64_t p1, int64_t bb) {
    const int64_t ch = SRT_SFX(kd_entry)(j, p < p1 ? p : p1 - 1);
    return j->w + (ch / SRT_QK) * bb + 2 * j->rows_pad + (ch % SRT_QK) * j->rows_pad;
}

static void SRT_SFX(k8)(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) {
    const int64_t rp = j->rows_pad, bb = srt_k8_block_bytes(j->rows), pe = srt_kd_pf_end(j, p1);
    int64_t t0, nt;
    srt_kd_tiles_of(j, SRT_K8_TILE, rp / SRT_K8_TILE, &t0, &nt);
    const int8_t *hq = j->h->q;
    _Alignas(64) float fa[K8_CHUNK * SRT_K8_TILE];
    _Alignas(64) VI ia[K8_CHUNK * KD_NH * 4];
    for (int64_t c0 = t0; c0 < nt; c0 += K8_CHUNK) {
        const int64_t c1 = c0 + K8_CHUNK < nt ? c0 + K8_CHUNK : nt, nc = c1 - c0;
        srt_kd_start(j, fa, c0 * SRT_K8_TILE, nc * SRT_K8_TILE);
        int64_t p = p0;
        while (p < p1) {
            const int64_t kb = SRT_SFX(kd_entry)(j, p) / SRT_QK, e = srt_kd_run_end(j, p, p1);
            const uint8_t *blk = j->w + kb * bb, *vec0 = blk + 2 * rp;
            if (e < p1) { /* the next K-block's scales for this pass, into L2 */
                const uint8_t *nsc = j->w + (SRT_SFX(kd_entry)(j, e) / SRT_QK) * bb + 2 * SRT_K8_TILE * c0;
                for (int64_t o = 0; o < 2 * SRT_K8_TILE * nc; o += 64) _mm_prefetch((const char *)(nsc + o), _MM_HINT_T1);
            }
            int32_t S = 0;
            for (int64_t q = p; q < e; q++) S += hq[SRT_SFX(kd_entry)(j, q)];
            const VI init = K8_INIT(S);
            for (int64_t i = 0; i < nc * KD_NH * 4; i++) ia[i] = init;
            for (int64_t q = p; q < e; q += 4) {
                const uint8_t *c[4];
                uint32_t wd = 0;
                for (int r = 0; r < 4; r++) {
                    if (q + r < e) {
                        const int64_t ch = SRT_SFX(kd_entry)(j, q + r);
                        c[r] = vec0 + (ch % SRT_QK) * rp;
                        wd |= (uint32_t)(uint8_t)hq[ch] << (8 * r);
                    } else {
                        c[r] = c[0]; /* padding: zero activation */
                    }
                }
                const VI a = VI_SET1((int32_t)wd);
                const uint8_t *pf[4], *pg[4];
                for (int r = 0; r < 4; r++) {
                    pf[r] = SRT_SFX(k8_vec)(j, q + 4 * K8_AHEAD + r, pe, bb);
                    pg[r] = SRT_SFX(k8_vec)(j, q + 4 * K8_FAR + r, pe, bb);
                }
                for (int64_t t = c0; t < c1; t++) {
                    for (int r = 0; r < 4; r++) {
                        _mm_prefetch((const char *)(pf[r] + 64 * t), _MM_HINT_T0);
                        _mm_prefetch((const char *)(pg[r] + 64 * t), _MM_HINT_T1);
                    }
                    for (int h = 0; h < KD_NH; h++) {
                        const int64_t to = 64 * t + VB * h;
                        const VI A = VI_LOAD(c[0] + to), B = VI_LOAD(c[1] + to), C = VI_LOAD(c[2] + to),
                                 D = VI_LOAD(c[3] + to);
                        const VI u0 = VI_UNPACKLO8(A, B), u1 = VI_UNPACKHI8(A, B);
                        const VI u2 = VI_UNPACKLO8(C, D), u3 = VI_UNPACKHI8(C, D);
                        VI *s = ia + ((t - c0) * KD_NH + h) * 4;
                        K8_DOT(s[0], VI_UNPACKLO16(u0, u2), a);
                        K8_DOT(s[1], VI_UNPACKHI16(u0, u2), a);
                        K8_DOT(s[2], VI_UNPACKLO16(u1, u3), a);
                        K8_DOT(s[3], VI_UNPACKHI16(u1, u3), a);
                    }
                }
            }
            const VF dk = VF_SET1(j->h->d[kb]);
            for (int64_t t = c0; t < c1; t++)
                for (int h = 0; h < KD_NH; h++)
                    for (int m = 0; m < 4; m++) {
                        const int64_t o = SRT_K8_TILE * t + 16 * m + KD_LANES * h;
                        float *fo = fa + (o - SRT_K8_TILE * c0);
                        VF_STORE(fo, VF_FMA(VF_CVT(ia[((t - c0) * KD_NH + h) * 4 + m]), VF_MUL(VF_SCALES(blk + 2 * o), dk),
                                            VF_LOAD(fo)));
                    }
            p = e;
        }
        const int64_t o0 = SRT_K8_TILE * c0, cnt = j->rows - o0 < nc * SRT_K8_TILE ? j->rows - o0 : nc * SRT_K8_TILE;
        if (cnt > 0) memcpy(y + o0, fa, (size_t)cnt * sizeof(float));
    }
}
