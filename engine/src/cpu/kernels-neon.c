/*
 * kernels-neon.c — the ARM NEON kernel table. It compiles the portable
 * kernels of kernels-scalar.c a second time for AArch64, where the compiler
 * vectorises their simple loops, and overrides the attention dot product
 * with NEON's native half-precision conversion. New NEON kernels go here.
 * On other targets the table is empty (name NULL) and never selected.
 */
#include "kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

static float neon_dot_f16_f32(int64_t n, const uint16_t *k, const float *q)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float16x4_t h = vreinterpret_f16_u16(vld1_u16(k + i));
        acc = vfmaq_f32(acc, vcvt_f32_f16(h), vld1q_f32(q + i));
    }
    float s = vaddvq_f32(acc);
    for (; i < n; i++)
        s += moe_f16_to_f32(k[i]) * q[i];
    return s;
}

#define MOE_KERNELS_TABLE       moe_cpu_kernels_neon
#define MOE_KERNELS_NAME        "neon"
#define MOE_KERNELS_DOT_F16_F32 neon_dot_f16_f32
#include "kernels-scalar.c"

#else

const moe_cpu_kernels moe_cpu_kernels_neon = {.name = NULL};

#endif
