/* The kernels of _fused.c for one floating-point type, included once per type: REAL is the
 * type, NTP_NAME(f) the function's name with the type's suffix, EXP and SQRT its
 * exponential and square root from the C library, EXP_V an exponential the compiler can
 * vectorise (elementwise loops). */
/* sum_i a_i b_i (c_i when c is given), in four interleaved partial sums (i mod 4) added as
 * (s0 + s1) + (s2 + s3), then the tail in order: a fixed order, four chains in flight. */
static inline REAL NTP_NAME(dot)(const REAL *a, const REAL *b, const REAL *c, int64_t n)
{
    REAL s0 = 0, s1 = 0, s2 = 0, s3 = 0;
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
    REAL s = (s0 + s1) + (s2 + s3);
    for (; i < n; i++)
        s += c ? a[i] * b[i] * c[i] : a[i] * b[i];
    return s;
}

/* The checks of the attention's arguments: sizes, and every allowed row of anc inside k. */
static int NTP_NAME(attention_args_bad)(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
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
int NTP_NAME(ntp_attention_fwd)(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                                const REAL *restrict q, const REAL *restrict k,
                                const REAL *restrict v, const int64_t *restrict anc,
                                const uint8_t *restrict mask, REAL scale, REAL *restrict out,
                                REAL *restrict p)
{
    if (NTP_NAME(attention_args_bad)(N, T, H, D, M, anc, mask, 1))
        return 1;
    const int64_t W = H * D;
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *mk = mask + n * T;
        const REAL *qn = q + n * W;
        REAL *pn = p + n * T * H;
        for (int64_t t = 0; t < T; t++) {
            const REAL *kr = k + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const REAL s = mk[t] ? NTP_NAME(dot)(qn + h * D, kr + h * D, NULL, D) : 0;
                pn[t * H + h] = s * scale;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            REAL top = -INFINITY, total = 0;
            for (int64_t t = 0; t < T; t++)
                if (mk[t] && pn[t * H + h] > top)
                    top = pn[t * H + h];
            for (int64_t t = 0; t < T; t++) {
                const REAL e = mk[t] ? EXP(pn[t * H + h] - top) : 0;
                pn[t * H + h] = e;
                total += e;
            }
            for (int64_t t = 0; t < T; t++)
                pn[t * H + h] = pn[t * H + h] / total;
        }
        REAL *on = out + n * W;
        for (int64_t j = 0; j < W; j++)
            on[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            if (!mk[t])
                continue;
            const REAL *vr = v + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const REAL pt = pn[t * H + h];
                for (int64_t d = 0; d < D; d++)
                    on[h * D + d] += pt * vr[h * D + d];
            }
        }
    }
    return 0;
}

/* g, gq: (N, H*D), gq written; gk, gv: (M, H*D), added to (the caller zeroes them). */
NTP_CLONES
int NTP_NAME(ntp_attention_bwd)(int64_t N, int64_t T, int64_t H, int64_t D, int64_t M,
                                const REAL *restrict q, const REAL *restrict k,
                                const REAL *restrict v, const int64_t *restrict anc,
                                const uint8_t *restrict mask, REAL scale, const REAL *restrict p,
                                const REAL *restrict g, REAL *restrict gq, REAL *restrict gk,
                                REAL *restrict gv)
{
    if (NTP_NAME(attention_args_bad)(N, T, H, D, M, anc, mask, 0))
        return 1;
    const int64_t W = H * D;
    REAL gs[NTP_MAX_T * NTP_MAX_H];
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *mk = mask + n * T;
        const REAL *qn = q + n * W, *gn = g + n * W, *pn = p + n * T * H;
        for (int64_t t = 0; t < T; t++) {
            const REAL *vr = v + anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                gs[t * H + h] = mk[t] ? NTP_NAME(dot)(gn + h * D, vr + h * D, NULL, D) : 0;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            REAL dot = 0;
            for (int64_t t = 0; t < T; t++)
                if (mk[t])
                    dot += pn[t * H + h] * gs[t * H + h];
            for (int64_t t = 0; t < T; t++)
                gs[t * H + h] = pn[t * H + h] * (gs[t * H + h] - dot) * scale;
        }
        REAL *gqn = gq + n * W;
        for (int64_t j = 0; j < W; j++)
            gqn[j] = 0;
        for (int64_t t = 0; t < T; t++) {
            if (!mk[t])
                continue;
            const int64_t r = anc[n * T + t] * W;
            for (int64_t h = 0; h < H; h++) {
                const REAL st = gs[t * H + h], pt = pn[t * H + h];
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
int NTP_NAME(ntp_rms_norm_fwd)(int64_t R, int64_t C, const REAL *restrict x, const REAL *restrict w,
                               REAL eps, REAL *restrict y, REAL *restrict rstd)
{
    if (R < 0 || C < 1)
        return 1;
    for (int64_t r = 0; r < R; r++) {
        const REAL *xr = x + r * C;
        const REAL ss = NTP_NAME(dot)(xr, xr, NULL, C);
        const REAL rs = 1 / SQRT(ss / C + eps);
        rstd[r] = rs;
        REAL *yr = y + r * C;
        for (int64_t c = 0; c < C; c++)
            yr[c] = xr[c] * rs * w[c];
    }
    return 0;
}

/* gy, gx: (R, C), gx written; gw: (C), added to (the caller zeroes it). */
NTP_CLONES
int NTP_NAME(ntp_rms_norm_bwd)(int64_t R, int64_t C, const REAL *restrict x, const REAL *restrict w,
                               const REAL *restrict rstd, const REAL *restrict gy,
                               REAL *restrict gx, REAL *restrict gw)
{
    if (R < 0 || C < 1)
        return 1;
    for (int64_t r = 0; r < R; r++) {
        const REAL *xr = x + r * C, *gr = gy + r * C;
        const REAL rs = rstd[r];
        const REAL dot = NTP_NAME(dot)(gr, w, xr, C);
        const REAL coef = rs * rs * rs * dot / C;
        REAL *gxr = gx + r * C;
        for (int64_t c = 0; c < C; c++) {
            gxr[c] = rs * (w[c] * gr[c]) - coef * xr[c];
            gw[c] += gr[c] * (xr[c] * rs);
        }
    }
    return 0;
}

/* SwiGLU's gate, elementwise over n values: out = silu(a) b with silu(a) = a s, s = 1 / (1 +
 * e^-a) (torch.nn.functional.silu); backward from g:  gb = g silu(a),
 * ga = g b s (1 + a (1 - s)) (torch's silu_backward).  One pass each way, nothing saved
 * beyond a and b. */
NTP_CLONES
int NTP_NAME(ntp_swiglu_fwd)(int64_t n, const REAL *restrict a, const REAL *restrict b,
                             REAL *restrict out)
{
    if (n < 0)
        return 1;
    for (int64_t i = 0; i < n; i++) {
        const REAL s = 1 / (1 + EXP_V(-a[i]));
        out[i] = a[i] * s * b[i];
    }
    return 0;
}

NTP_CLONES
int NTP_NAME(ntp_swiglu_bwd)(int64_t n, const REAL *restrict a, const REAL *restrict b,
                             const REAL *restrict g, REAL *restrict ga, REAL *restrict gb)
{
    if (n < 0)
        return 1;
    for (int64_t i = 0; i < n; i++) {
        const REAL s = 1 / (1 + EXP_V(-a[i]));
        gb[i] = g[i] * (a[i] * s);
        ga[i] = g[i] * b[i] * (s * (1 + a[i] * (1 - s)));
    }
    return 0;
}
