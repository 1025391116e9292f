/* Fused kernels of the transformer's blocks on the prefix trie (ntpcore.geo.models.fused),
 * forward and backward, called through ctypes.
 *
 * 1. Attention over the trie.  Query row n attends to the key/value rows anc[n, 0..T-1]
 *    that mask[n, t] allows; every row holds H heads of width D.  Per (n, head):
 *        s_t = (q . k_t) scale,   p = softmax_t(s) over the allowed t,   o = sum_t p_t v_t;
 *    backward, from the output gradient g:
 *        gp_t = g . v_t,   gs_t = p_t (gp_t - sum_u p_u gp_u) scale,
 *        gq = sum_t gs_t k_t,   gk[anc_t] += gs_t q,   gv[anc_t] += p_t g.
 * 2. RMSNorm of the rows of x (R, C) with gain w (C):
 *        r = 1 / sqrt(sum_c x_c^2 / C + eps),   y = (x r) w;
 *    backward:  gx = r (w gy) - (r^3 / C) (sum_c gy_c w_c x_c) x,   gw += gy (x r).
 *
 * The same functions as torch's operations (fused.py's torch paths, which the tests
 * compare with), in one pass over the rows instead of a dozen tensor operations and their
 * temporaries (the attention's gathered (N, T, H, D) keys and values, whose broadcast inner
 * dimensions torch does not vectorise).  Every sum is taken in a fixed order and no
 * multiply-add is fused (-ffp-contract=off in setup.py), so the vector width of the CPU does
 * not change a bit (exp is the C library's).  Plain loops over the rows: the runner trains
 * on one thread.  Each function returns 1 on arguments it cannot take (checked before any
 * write), else 0.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
#define NTP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NTP_CLONES
#endif

#define NTP_MAX_T 64 /* the longest context (trie depth) the attention takes */
#define NTP_MAX_H 64 /* the most heads */

/* ---- float ---- */

/* sum_i a_i b_i (c_i when c is given), in four interleaved partial sums (i mod 4) added as
 * (s0 + s1) + (s2 + s3), then the tail in order: a fixed order, four chains in flight. */
static inline float dot_f32(const float *a, const float *b, const float *c, int64_t n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    if (c) {
        for (; i + 4 <= n; i += 4) {
            s0 += a[i] * b[i] * c[i];
            s1 += a[i + 1] * b[i + 1] * c[i + 1];
            s2 += a[i + 2] * b[i + 2] * c[i + 2];
            s3 += a[i + 3] * b[i + 3] * c[i + 3];
        }
    } else {
        for (; i + 4 <= n; i += 4) {
            s0 += a[i] * b[i];
            s1 += a[i + 1] * b[i + 1];
            s2 += a[i + 2] * b[i + 2];
            s3 += a[i + 3] * b[i + 3];
        }
    }
    float s = (s0 + s1) + (s2 + s3);
    for (; i < n; i++)
        s += c ? a[i] * b[i] * c[i] : a[i] * b[i];
    return s;
}

/* The checks of the attention's arguments: sizes, and every allowed row of anc inside k. */
static int attention_args_bad_f32(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                                  const int64_t *anc, const uint8_t *mask, int need_any)
{
    if (T < 1 || T > NTP_MAX_T || H < 1 || H > NTP_MAX_H || D < 1 || M < 1 || N < 0)
        return 1;
    for (int64_t n = 0; n < N; n++) {
        int any = 0;
        for (int64_t t = 0; t < T; t++) {
            if (mask[n * T + t] && (anc[n * T + t] < 0 || anc[n * T + t] >= M))
                return 1;
            any |= mask[n * T + t];
        }
        if (need_any && !any)
            return 1;
    }
    return 0;
}

/* q, out: (N, H*D); k, v: (M, H*D); anc: (N, T) rows of k and v; mask: (N, T) bytes;
 * p: (N, T, H) the probabilities, written here and read by the backward. */
NTP_CLONES
int ntp_attention_fwd_f32(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                          const float *restrict q, const float *restrict k,
                          const float *restrict v, const int64_t *restrict anc,
                          const uint8_t *restrict mask, float scale, float *restrict out,
                          float *restrict p)
{
    if (attention_args_bad_f32(N, T, H, D, M, anc, mask, 1))
        return 1;
    const int64_t W = H * D;
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *mk = mask + n * T;
        const float *qn = q + n * W;
        float *pn = p + n * T * H;
        for (int64_t t = 0; t < T; t++) {
            const float *kr = k + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const float s = mk[t] ? dot_f32(qn + h * D, kr + h * D, NULL, D) : 0;
                pn[t * H + h] = s * scale;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            float top = -INFINITY, total = 0;
            for (int64_t t = 0; t < T; t++)
                if (mk[t] && pn[t * H + h] > top)
                    top = pn[t * H + h];
            for (int64_t t = 0; t < T; t++) {
                const float e = mk[t] ? expf(pn[t * H + h] - top) : 0;
                pn[t * H + h] = e;
                total += e;
            }
            for (int64_t t = 0; t < T; t++)
                pn[t * H + h] = pn[t * H + h] / total;
        }
        float *on = out + n * W;
        for (int64_t j = 0; j < W; j++)
            on[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            if (!mk[t])
                continue;
            const float *vr = v + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const float pt = pn[t * H + h];
                for (int64_t d = 0; d < D; d++)
                    on[h * D + d] += pt * vr[h * D + d];
            }
        }
    }
    return 0;
}

/* g, gq: (N, H*D), gq written; gk, gv: (M, H*D), added to (the caller zeroes them). */
NTP_CLONES
int ntp_attention_bwd_f32(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                          const float *restrict q, const float *restrict k,
                          const float *restrict v, const int64_t *restrict anc,
                          const uint8_t *restrict mask, float scale, const float *restrict p,
                          const float *restrict g, float *restrict gq, float *restrict gk,
                          float *restrict gv)
{
    if (attention_args_bad_f32(N, T, H, D, M, anc, mask, 0))
        return 1;
    const int64_t W = H * D;
    float gs[NTP_MAX_T * NTP_MAX_H];
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *mk = mask + n * T;
        const float *qn = q + n * W, *gn = g + n * W, *pn = p + n * T * H;
        for (int64_t t = 0; t < T; t++) {
            const float *vr = v + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                gs[t * H + h] = mk[t] ? dot_f32(gn + h * D, vr + h * D, NULL, D) : 0;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            float dot = 0;
            for (int64_t t = 0; t < T; t++)
                if (mk[t])
                    dot += pn[t * H + h] * gs[t * H + h];
            for (int64_t t = 0; t < T; t++)
                gs[t * H + h] = pn[t * H + h] * (gs[t * H + h] - dot) * scale;
        }
        float *gqn = gq + n * W;
        for (int64_t j = 0; j < W; j++)
            gqn[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            if (!mk[t])
                continue;
            const int64_t r = anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const float st = gs[t * H + h], pt = pn[t * H + h];
                for (int64_t d = 0; d < D; d++) {
                    gqn[h * D + d] += st * k[r + h * D + d];
                    gk[r + h * D + d] += st * qn[h * D + d];
                    gv[r + h * D + d] += pt * gn[h * D + d];
                }
            }
        }
    }
    return 0;
}

/* x, y: (R, C); w: (C); rstd: (R), written here and read by the backward. */
NTP_CLONES
int ntp_rms_norm_fwd_f32(int64_t R, int64_t C, const float *restrict x, const float *restrict w,
                         float eps, float *restrict y, float *restrict rstd)
{
    if (R < 0 || C < 1)
        return 1;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        const float ss = dot_f32(xr, xr, NULL, C);
        const float rs = 1 / sqrtf(ss / C + eps);
        rstd[r] = rs;
        float *yr = y + r * C;
        for (int64_t c = 0; c < C; c++)
            yr[c] = xr[c] * rs * w[c];
    }
    return 0;
}

/* gy, gx: (R, C), gx written; gw: (C), added to (the caller zeroes it). */
NTP_CLONES
int ntp_rms_norm_bwd_f32(int64_t R, int64_t C, const float *restrict x, const float *restrict w,
                         const float *restrict rstd, const float *restrict gy,
                         float *restrict gx, float *restrict gw)
{
    if (R < 0 || C < 1)
        return 1;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C, *gr = gy + r * C;
        const float rs = rstd[r];
        const float dot = dot_f32(gr, w, xr, C);
        const float coef = rs * rs * rs * dot / C;
        float *gxr = gx + r * C;
        for (int64_t c = 0; c < C; c++) {
            gxr[c] = rs * (w[c] * gr[c]) - coef * xr[c];
            gw[c] += gr[c] * (xr[c] * rs);
        }
    }
    return 0;
}

/* ---- double ---- */

/* sum_i a_i b_i (c_i when c is given), in four interleaved partial sums (i mod 4) added as
 * (s0 + s1) + (s2 + s3), then the tail in order: a fixed order, four chains in flight. */
static inline double dot_f64(const double *a, const double *b, const double *c, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    if (c) {
        for (; i + 4 <= n; i += 4) {
            s0 += a[i] * b[i] * c[i];
            s1 += a[i + 1] * b[i + 1] * c[i + 1];
            s2 += a[i + 2] * b[i + 2] * c[i + 2];
            s3 += a[i + 3] * b[i + 3] * c[i + 3];
        }
    } else {
        for (; i + 4 <= n; i += 4) {
            s0 += a[i] * b[i];
            s1 += a[i + 1] * b[i + 1];
            s2 += a[i + 2] * b[i + 2];
            s3 += a[i + 3] * b[i + 3];
        }
    }
    double s = (s0 + s1) + (s2 + s3);
    for (; i < n; i++)
        s += c ? a[i] * b[i] * c[i] : a[i] * b[i];
    return s;
}

/* The checks of the attention's arguments: sizes, and every allowed row of anc inside k. */
static int attention_args_bad_f64(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                                  const int64_t *anc, const uint8_t *mask, int need_any)
{
    if (T < 1 || T > NTP_MAX_T || H < 1 || H > NTP_MAX_H || D < 1 || M < 1 || N < 0)
        return 1;
    for (int64_t n = 0; n < N; n++) {
        int any = 0;
        for (int64_t t = 0; t < T; t++) {
            if (mask[n * T + t] && (anc[n * T + t] < 0 || anc[n * T + t] >= M))
                return 1;
            any |= mask[n * T + t];
        }
        if (need_any && !any)
            return 1;
    }
    return 0;
}

/* q, out: (N, H*D); k, v: (M, H*D); anc: (N, T) rows of k and v; mask: (N, T) bytes;
 * p: (N, T, H) the probabilities, written here and read by the backward. */
NTP_CLONES
int ntp_attention_fwd_f64(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                          const double *restrict q, const double *restrict k,
                          const double *restrict v, const int64_t *restrict anc,
                          const uint8_t *restrict mask, double scale, double *restrict out,
                          double *restrict p)
{
    if (attention_args_bad_f64(N, T, H, D, M, anc, mask, 1))
        return 1;
    const int64_t W = H * D;
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *mk = mask + n * T;
        const double *qn = q + n * W;
        double *pn = p + n * T * H;
        for (int64_t t = 0; t < T; t++) {
            const double *kr = k + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const double s = mk[t] ? dot_f64(qn + h * D, kr + h * D, NULL, D) : 0;
                pn[t * H + h] = s * scale;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            double top = -INFINITY, total = 0;
            for (int64_t t = 0; t < T; t++)
                if (mk[t] && pn[t * H + h] > top)
                    top = pn[t * H + h];
            for (int64_t t = 0; t < T; t++) {
                const double e = mk[t] ? exp(pn[t * H + h] - top) : 0;
                pn[t * H + h] = e;
                total += e;
            }
            for (int64_t t = 0; t < T; t++)
                pn[t * H + h] = pn[t * H + h] / total;
        }
        double *on = out + n * W;
        for (int64_t j = 0; j < W; j++)
            on[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            if (!mk[t])
                continue;
            const double *vr = v + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const double pt = pn[t * H + h];
                for (int64_t d = 0; d < D; d++)
                    on[h * D + d] += pt * vr[h * D + d];
            }
        }
    }
    return 0;
}

/* g, gq: (N, H*D), gq written; gk, gv: (M, H*D), added to (the caller zeroes them). */
NTP_CLONES
int ntp_attention_bwd_f64(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                          const double *restrict q, const double *restrict k,
                          const double *restrict v, const int64_t *restrict anc,
                          const uint8_t *restrict mask, double scale, const double *restrict p,
                          const double *restrict g, double *restrict gq, double *restrict gk,
                          double *restrict gv)
{
    if (attention_args_bad_f64(N, T, H, D, M, anc, mask, 0))
        return 1;
    const int64_t W = H * D;
    double gs[NTP_MAX_T * NTP_MAX_H];
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *mk = mask + n * T;
        const double *qn = q + n * W, *gn = g + n * W, *pn = p + n * T * H;
        for (int64_t t = 0; t < T; t++) {
            const double *vr = v + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                gs[t * H + h] = mk[t] ? dot_f64(gn + h * D, vr + h * D, NULL, D) : 0;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            double dot = 0;
            for (int64_t t = 0; t < T; t++)
                if (mk[t])
                    dot += pn[t * H + h] * gs[t * H + h];
            for (int64_t t = 0; t < T; t++)
                gs[t * H + h] = pn[t * H + h] * (gs[t * H + h] - dot) * scale;
        }
        double *gqn = gq + n * W;
        for (int64_t j = 0; j < W; j++)
            gqn[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            if (!mk[t])
                continue;
            const int64_t r = anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const double st = gs[t * H + h], pt = pn[t * H + h];
                for (int64_t d = 0; d < D; d++) {
                    gqn[h * D + d] += st * k[r + h * D + d];
                    gk[r + h * D + d] += st * qn[h * D + d];
                    gv[r + h * D + d] += pt * gn[h * D + d];
                }
            }
        }
    }
    return 0;
}

/* x, y: (R, C); w: (C); rstd: (R), written here and read by the backward. */
NTP_CLONES
int ntp_rms_norm_fwd_f64(int64_t R, int64_t C, const double *restrict x, const double *restrict w,
                         double eps, double *restrict y, double *restrict rstd)
{
    if (R < 0 || C < 1)
        return 1;
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x + r * C;
        const double ss = dot_f64(xr, xr, NULL, C);
        const double rs = 1 / sqrt(ss / C + eps);
        rstd[r] = rs;
        double *yr = y + r * C;
        for (int64_t c = 0; c < C; c++)
            yr[c] = xr[c] * rs * w[c];
    }
    return 0;
}

/* gy, gx: (R, C), gx written; gw: (C), added to (the caller zeroes it). */
NTP_CLONES
int ntp_rms_norm_bwd_f64(int64_t R, int64_t C, const double *restrict x, const double *restrict w,
                         const double *restrict rstd, const double *restrict gy,
                         double *restrict gx, double *restrict gw)
{
    if (R < 0 || C < 1)
        return 1;
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x + r * C, *gr = gy + r * C;
        const double rs = rstd[r];
        const double dot = dot_f64(gr, w, xr, C);
        const double coef = rs * rs * rs * dot / C;
        double *gxr = gx + r * C;
        for (int64_t c = 0; c < C; c++) {
            gxr[c] = rs * (w[c] * gr[c]) - coef * xr[c];
            gw[c] += gr[c] * (xr[c] * rs);
        }
    }
    return 0;
}


static struct PyModuleDef fused_module = {
    PyModuleDef_HEAD_INIT, "_fused",
    "Fused kernels of the transformer on the prefix trie (ntpcore.geo.models.fused, called "
    "through ctypes).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fused(void) { return PyModule_Create(&fused_module); }
