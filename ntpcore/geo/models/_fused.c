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
 * 3. SwiGLU's gate silu(a) b, elementwise (the feed-forward's matrix products stay torch's).
 *
 * The same functions as torch's operations (fused.py's torch paths, which the tests
 * compare with), in one pass over the rows instead of a dozen tensor operations and their
 * temporaries (the attention's gathered (N, T, H, D) keys and values, whose broadcast inner
 * dimensions torch does not vectorise).  Every sum is taken in a fixed order and no
 * multiply-add is fused (-ffp-contract=off in setup.py), so the vector width of the CPU does
 * not change a bit (exp is the C library's, or, in the elementwise float loops, the one
 * written below).  Plain loops over the rows: the runner trains
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

/* e^x in float for elementwise loops, written out so that the compiler vectorises it (the
 * C library's expf is a call): e^x = 2^k e^r with k = x log2(e) rounded to the nearest
 * integer (by adding and subtracting 1.5 2^23), r = x - k ln 2 (ln 2 in two parts, the first
 * exact in few bits, so that k C1 is exact), e^r = 1 + r + r^2 P(r) with Cephes' degree-5
 * polynomial P on |r| <= ln(2)/2 (relative error about 1e-7), 2^k from the exponent bits.
 * x is first clamped to [-87, 88], where 2^k stays a normal float: e^x is then 1.6e-38 at
 * most below -87 (the SwiGLU gate's sigmoid 1 / (1 + e^-a) then differs from 0 or 1 by
 * less than 1e-37).  Every operation is rounded on its own (-ffp-contract=off), so every
 * CPU computes the same bits. */
static inline float ntp_expf_v(float x)
{
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float shifter = 12582912.0f; /* 1.5 * 2^23 */
    const float kf = (x * 1.44269504088896341f + shifter) - shifter;
    float r = x - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    union {
        uint32_t u;
        float f;
    } two_k = {.u = (uint32_t)((int32_t)kf + 127) << 23};
    return p * two_k.f;
}

#define REAL float
#define NTP_NAME(f) f##_f32
#define EXP expf
#define EXP_V ntp_expf_v
#define SQRT sqrtf
#include "_fused_kernels.h"
#undef REAL
#undef NTP_NAME
#undef EXP
#undef EXP_V
#undef SQRT

#define REAL double
#define NTP_NAME(f) f##_f64
#define EXP exp
#define EXP_V exp
#define SQRT sqrt
#include "_fused_kernels.h"

static struct PyModuleDef fused_module = {
    PyModuleDef_HEAD_INIT, "_fused",
    "Fused kernels of the transformer on the prefix trie (ntpcore.geo.models.fused, called "
    "through ctypes).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fused(void) { return PyModule_Create(&fused_module); }
