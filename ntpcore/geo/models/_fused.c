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

#define REAL float
#define NTP_NAME(f) f##_f32
#define EXP expf
#define SQRT sqrtf
#include "_fused_kernels.h"
#undef REAL
#undef NTP_NAME
#undef EXP
#undef SQRT

#define REAL double
#define NTP_NAME(f) f##_f64
#define EXP exp
#define SQRT sqrt
#include "_fused_kernels.h"

static struct PyModuleDef fused_module = {
    PyModuleDef_HEAD_INIT, "_fused",
    "Fused kernels of the transformer on the prefix trie (ntpcore.geo.models.fused, called "
    "through ctypes).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fused(void) { return PyModule_Create(&fused_module); }
