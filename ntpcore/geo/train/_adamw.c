/* One AdamW step over a flat float64 parameter vector (the numpy UFM trainer,
 * ntpcore.geo.train.numpy_ufm), called through ctypes.
 *
 * The update of torch.optim.AdamW (amsgrad off) with the arithmetic of torch's fused CPU
 * kernel: p <- p (1 - lr wd); m <- m + (1 - b1)(g - m) and v <- v b2 + ((1 - b2) g) g, each
 * one fused multiply-add; p <- p - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).  Every other
 * operation is rounded on its own (-ffp-contract=off in setup.py), so the result is the same
 * on every CPU; tests/geo/test_adamw_compiled.py compares it with torch's kernel.  One pass
 * over the four arrays instead of a dispatch of torch's list-of-tensors kernel per step: the
 * UFM's 5888 parameters cost about as much to dispatch as to update.
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

/* decay = 1 - lr wd, w1 = 1 - b1, w2 = 1 - b2, step_size = lr / bc1, bc2_sqrt = sqrt(bc2),
 * with bc_k = 1 - b_k^t at step t. */
NTP_CLONES
void ntp_adamw(int64_t n, double *restrict theta, const double *restrict grad,
               double *restrict m, double *restrict v, double decay, double b2, double w1,
               double w2, double eps, double step_size, double bc2_sqrt)
{
    for (int64_t i = 0; i < n; i++) {
        const double g = grad[i];
        const double p = theta[i] * decay;
        const double mi = fma(w1, g - m[i], m[i]);
        const double vi = fma(w2 * g, g, v[i] * b2);
        const double denom = sqrt(vi) / bc2_sqrt + eps;
        theta[i] = p - step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

static struct PyModuleDef adamw_module = {
    PyModuleDef_HEAD_INIT, "_adamw",
    "AdamW step of ntpcore.geo.train.numpy_ufm (called through ctypes).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__adamw(void) { return PyModule_Create(&adamw_module); }
