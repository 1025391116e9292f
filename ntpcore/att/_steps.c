/* Compiled descent steps for one self-attention layer: the hot loop of the attention
 * experiments (ntpcore.att.descent), many (normalized) GD steps of every problem of a
 * batch per call, called through ctypes by ntpcore.att.compiled.
 *
 * The arithmetic is that of ntpcore.att.kernel.Kernel (the same formulas, the same
 * cancellation-free gradients, the same shift rule).  Every sum runs in a fixed order
 * (scores over q = 0, 1, ...; gradients over t = 0, 1, ...; sequence sums over the
 * positions), loops are vectorised across independent outputs only, and floating-point
 * contraction is off (-ffp-contract=off in setup.py), so whichever instruction set the
 * loader picks (target_clones below) computes the same bits (exp is the C library's, which
 * may pick a variant of its own by CPU); the results differ from numpy's BLAS products by
 * rounding only (tests/att/test_att_compiled.py).
 *
 * Layout: problem b (0 <= b < B) has dataset ds[b] (0 <= ds[b] < G); arrays are
 * C-contiguous unless a stride is passed; F is (G, N, p) with rows vec(x_t xbar_i^T),
 * FT its transpose (G, p, N); N = n T positions, p = d^2.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
#define NTP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NTP_CLONES
#endif


/* z = bias + vec(W) F^T for one problem (accumulated over q), a block of positions at a
 * time in registers (blocks of 32, 24, 16 and 8, then one by one: the same sums). */
#define NTP_SCORE_BLOCK(WIDTH)                                              \
    for (; t0 + (WIDTH) <= N; t0 += (WIDTH)) {                              \
        double acc[WIDTH];                                                  \
        for (int l = 0; l < (WIDTH); l++) acc[l] = bb[t0 + l];              \
        for (int64_t q = 0; q < p; q++) {                                   \
            const double wq = Wb[q];                                        \
            const double *restrict row = FTk + q * N + t0;                  \
            for (int l = 0; l < (WIDTH); l++) acc[l] += wq * row[l];        \
        }                                                                   \
        for (int l = 0; l < (WIDTH); l++) z[t0 + l] = acc[l];               \
    }

static inline void scores(const double *restrict Wb, const double *restrict FTk,
                          const double *restrict bb, double *restrict z, int64_t N, int64_t p)
{
    int64_t t0 = 0;
    NTP_SCORE_BLOCK(32)
    NTP_SCORE_BLOCK(24)
    NTP_SCORE_BLOCK(16)
    NTP_SCORE_BLOCK(8)
    for (int64_t t = t0; t < N; t++) {
        double acc = bb[t];
        for (int64_t q = 0; q < p; q++) acc += Wb[q] * FTk[q * N + t];
        z[t] = acc;
    }
}

/* z_t -= max of its sequence (n sequences of T positions). */
static inline void shift_by_max(double *restrict z, int64_t n, int64_t T)
{
    for (int64_t i = 0; i < n; i++) {
        double m = z[i * T];
        for (int64_t t = i * T + 1; t < (i + 1) * T; t++)
            if (z[t] > m) m = z[t];
        for (int64_t t = i * T; t < (i + 1) * T; t++) z[t] -= m;
    }
}

/* g = dz F for one problem (accumulated over t), 32 entries of g at a time in registers. */
static inline void grad_rows(const double *restrict dz, const double *restrict Fk,
                             double *restrict g, int64_t N, int64_t p)
{
    int64_t q0 = 0;
    for (; q0 + 32 <= p; q0 += 32) {
        double acc[32] = {0.0};
        for (int64_t t = 0; t < N; t++) {
            const double dt = dz[t];
            const double *restrict row = Fk + t * p + q0;
            for (int l = 0; l < 32; l++) acc[l] += dt * row[l];
        }
        for (int l = 0; l < 32; l++) g[q0 + l] = acc[l];
    }
    for (int64_t q = q0; q < p; q++) g[q] = 0.0;
    for (int64_t t = 0; t < N; t++) {
        const double dt = dz[t];
        const double *restrict row = Fk + t * p;
        for (int64_t q = q0; q < p; q++) g[q] += dt * row[q];
    }
}

/* W -= eta g / (||g|| + eps) (normalized) or W -= g (plain GD, eta folded into the weights). */
static inline void update(double *restrict Wb, const double *restrict g, int64_t p,
                          int normalized, double eta, double eps)
{
    if (normalized) {
        double nrm = 0.0;
        for (int64_t q = 0; q < p; q++) nrm += g[q] * g[q];
        const double scale = eta / (sqrt(nrm) + eps);
        for (int64_t q = 0; q < p; q++) Wb[q] -= g[q] * scale;
    } else {
        for (int64_t q = 0; q < p; q++) Wb[q] -= g[q];
    }
}

/* The exponentiated scores of one problem into z (shifted by each sequence's maximum when
 * shift), copied to rec when it is not NULL. */
static inline void exp_scores(const double *restrict Wb, const double *restrict FTk,
                              const double *restrict bb, double *restrict z, int64_t N,
                              int64_t p, int64_t n, int shift, double *rec)
{
    scores(Wb, FTk, bb, z, N, p);
    if (shift) shift_by_max(z, n, N / n);
    for (int64_t t = 0; t < N; t++) z[t] = exp(z[t]);
    if (rec) memcpy(rec, z, N * sizeof(double));
}

/* The step from dl/dz: gradient, update, W after it copied to rec when it is not NULL. */
static inline void take_step(double *restrict Wb, const double *restrict dz,
                             const double *restrict Fk, double *restrict g, int64_t N,
                             int64_t p, int normalized, double eta, double eps, double *rec)
{
    grad_rows(dz, Fk, g, N, p);
    update(Wb, g, p, normalized, eta, eps);
    if (rec) memcpy(rec, Wb, p * sizeof(double));
}

/* Identity head, log-loss: advance every problem of W (B, p) by n_steps steps, in place.
 *
 * W_out (when not NULL): W after step j at W_out + b*wo_b + j*wo_j;
 * e_out: the exponentiated scores of step j < n_e at e_out + b*eo_b + j*eo_j;
 * bias (B, N) 0 or -inf; label (G, N) 1.0 on the label's positions; w (B, n) sample
 * weights (times eta for plain GD); eta (B,) normalized-GD step sizes; shift: subtract each
 * sequence's maximum before exp, and floor the label mass at tiny.
 * dl/dz_t = w e_t / Z off the label, -w e_t Z_n / (Z_l Z) on it.  Returns 0; -1 on
 * inconsistent sizes (nothing changed), -2 when the buffers cannot be allocated. */
NTP_CLONES
int ntp_identity_log_steps(int64_t B, int64_t G, int64_t n, int64_t N, int64_t p,
                           int64_t n_steps, double *W, double *W_out, int64_t wo_b,
                           int64_t wo_j, double *e_out, int64_t eo_b, int64_t eo_j,
                           int64_t n_e, const double *F, const double *FT,
                           const int64_t *ds, const double *bias, const double *label,
                           const double *w, const double *eta, double eps, int normalized,
                           int shift, double tiny)
{
    if (n <= 0 || N % n) return -1;
    for (int64_t b = 0; b < B; b++)
        if (ds[b] < 0 || ds[b] >= G) return -1;
    const int64_t T = N / n;
    double *buf = malloc((2 * N + p) * sizeof(double));
    if (!buf) return -2;
    double *z = buf, *dz = buf + N, *g = buf + 2 * N;
    for (int64_t b = 0; b < B; b++) {
        const int64_t k = ds[b];
        double *restrict Wb = W + b * p;
        const double *restrict Fk = F + k * N * p;
        const double *restrict FTk = FT + k * p * N;
        const double *restrict lab = label + k * N;
        const double *restrict bb = bias + b * N;
        const double *restrict wb = w + b * n;
        for (int64_t j = 0; j < n_steps; j++) {
            double *rec = j < n_e ? e_out + b * eo_b + j * eo_j : NULL;
            exp_scores(Wb, FTk, bb, z, N, p, n, shift, rec);
            for (int64_t i = 0; i < n; i++) {
                double zl = 0.0, zn = 0.0;
                for (int64_t t = i * T; t < (i + 1) * T; t++) {
                    if (lab[t] != 0.0) zl += z[t];
                    else zn += z[t];
                }
                const double off = wb[i] / (zl + zn);
                if (shift && zl < tiny) zl = tiny;
                const double on = -((zn / zl) * off);
                for (int64_t t = i * T; t < (i + 1) * T; t++)
                    dz[t] = z[t] * (lab[t] != 0.0 ? on : off);
            }
            take_step(Wb, dz, Fk, g, N, p, normalized, eta[b], eps,
                      W_out ? W_out + b * wo_b + j * wo_j : NULL);
        }
    }
    free(buf);
    return 0;
}

/* General head u = A^T s (per sequence, A_tk = x_t^T e_k), cross-entropy or squared loss:
 * advance every problem of W (B, p) by n_steps steps, in place (records as above).
 *
 * A (G, n, T, K); onehot (G, n, K) 1.0 at the label; w (B, n) sample weights (times eta
 * for plain GD); all_ce: every problem has the cross-entropy, dl/du = w p - w 1_y; else
 * dl/du = (p - 1_y) (w_ce + 2 w (1 - p_y) p_y) with w_ce (B, n) = w on cross-entropy
 * problems, 0 else, and w_sq (B, n) = 2 w on squared-loss problems, 0 else; shift_u:
 * subtract each sequence's largest logit before exp.  With g_t = sum_k A_tk dl/du_k,
 * dl/dz_t = s_t (g_t m_t - sum_{u != t} s_u g_u), m_t = sum_{u != t} s_u.  Returns as above. */
NTP_CLONES
int ntp_general_steps(int64_t B, int64_t G, int64_t n, int64_t N, int64_t p, int64_t K,
                      int64_t n_steps, double *W, double *W_out, int64_t wo_b, int64_t wo_j,
                      double *e_out, int64_t eo_b, int64_t eo_j, int64_t n_e,
                      const double *F, const double *FT, const int64_t *ds,
                      const double *bias, const double *A, const double *onehot,
                      const double *w, const double *w_ce, const double *w_sq, int all_ce,
                      const double *eta, double eps, int normalized, int shift, int shift_u)
{
    if (n <= 0 || N % n || K <= 0) return -1;
    for (int64_t b = 0; b < B; b++)
        if (ds[b] < 0 || ds[b] >= G) return -1;
    const int64_t T = N / n;
    double *buf = malloc((4 * N + n * K + p) * sizeof(double));
    if (!buf) return -2;
    double *z = buf, *s = buf + N, *dz = buf + 2 * N, *gg = buf + 3 * N;
    double *du = buf + 4 * N, *g = buf + 4 * N + n * K;
    for (int64_t b = 0; b < B; b++) {
        const int64_t k = ds[b];
        double *restrict Wb = W + b * p;
        const double *restrict Fk = F + k * N * p;
        const double *restrict FTk = FT + k * p * N;
        const double *restrict Ak = A + k * N * K;
        const double *restrict yk = onehot + k * n * K;
        const double *restrict bb = bias + b * N;
        for (int64_t j = 0; j < n_steps; j++) {
            double *rec = j < n_e ? e_out + b * eo_b + j * eo_j : NULL;
            exp_scores(Wb, FTk, bb, z, N, p, n, shift, rec);
            for (int64_t i = 0; i < n; i++) {
                const int64_t t0 = i * T;
                double Zs = 0.0;
                for (int64_t t = t0; t < t0 + T; t++) Zs += z[t];
                for (int64_t t = t0; t < t0 + T; t++) s[t] = z[t] / Zs;  /* attention */
                double *restrict ui = du + i * K;                        /* logits, then dl/du */
                for (int64_t c = 0; c < K; c++) ui[c] = 0.0;
                for (int64_t t = t0; t < t0 + T; t++) {
                    const double st = s[t];
                    const double *restrict At = Ak + t * K;
                    for (int64_t c = 0; c < K; c++) ui[c] += st * At[c];
                }
                if (shift_u) {
                    double m = ui[0];
                    for (int64_t c = 1; c < K; c++)
                        if (ui[c] > m) m = ui[c];
                    for (int64_t c = 0; c < K; c++) ui[c] -= m;
                }
                double Zu = 0.0;
                for (int64_t c = 0; c < K; c++) {
                    ui[c] = exp(ui[c]);
                    Zu += ui[c];
                }
                const double *restrict yi = yk + i * K;
                const double wi = w[b * n + i];
                if (all_ce) {
                    for (int64_t c = 0; c < K; c++) ui[c] = (ui[c] / Zu) * wi - yi[c] * wi;
                } else {
                    double py = 0.0;
                    for (int64_t c = 0; c < K; c++) {
                        ui[c] = ui[c] / Zu;
                        py += ui[c] * yi[c];
                    }
                    const double coef = (((1.0 - py) * py) * w_sq[b * n + i]) + w_ce[b * n + i];
                    for (int64_t c = 0; c < K; c++) ui[c] = (ui[c] - yi[c]) * coef;
                }
                for (int64_t t = t0; t < t0 + T; t++) {  /* g_t = sum_k A_tk dl/du_k */
                    const double *restrict At = Ak + t * K;
                    double acc = 0.0;
                    for (int64_t c = 0; c < K; c++) acc += ui[c] * At[c];
                    gg[t] = acc;
                }
                for (int64_t t = t0; t < t0 + T; t++) {  /* sums over the other positions */
                    double m = 0.0, q = 0.0;
                    for (int64_t u = t0; u < t0 + T; u++) {
                        if (u == t) continue;
                        m += s[u];
                        q += s[u] * gg[u];
                    }
                    dz[t] = s[t] * (gg[t] * m - q);
                }
            }
            take_step(Wb, dz, Fk, g, N, p, normalized, eta[b], eps,
                      W_out ? W_out + b * wo_b + j * wo_j : NULL);
        }
    }
    free(buf);
    return 0;
}

/* A module object, so that the build installs this file as an extension of the package;
 * its functions are reached through ctypes (ntpcore.att.compiled). */
static struct PyModuleDef steps_module = {
    PyModuleDef_HEAD_INIT, "_steps",
    "Compiled descent steps of ntpcore.att (called through ctypes by ntpcore.att.compiled).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__steps(void) { return PyModule_Create(&steps_module); }
