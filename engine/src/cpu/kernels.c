/*
 * kernels.c — picks the kernel table for this CPU at run time and maps
 * weight types to their activation formats. The ISA check uses
 * __builtin_cpu_supports (gcc, clang and mingw-w64), which also checks
 * that the OS saves the wide registers (XCR0), so a table is never chosen
 * on a system that would fault on its instructions.
 */
#include "kernels.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* F16C (CPUID leaf 1, ECX bit 29). Asked through cpuid because clang 14's
 * __builtin_cpu_supports does not know the "f16c" feature name; F16C uses
 * the same YMM state the avx2 check already requires the OS to save. */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

bool moe_cpu_kernels_usable(const moe_cpu_kernels *k)
{
    if (!k || !k->name)
        return false;
    if (strcmp(k->name, "scalar") == 0)
        return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (strcmp(k->name, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_has_f16c();
    if (strcmp(k->name, "avx512") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_has_f16c() && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
    if (strcmp(k->name, "neon") == 0)
        return true;
#endif
    return false;
}

/* Best first. */
static const moe_cpu_kernels *const all_tables[] = {
    &moe_cpu_kernels_avx512,
    &moe_cpu_kernels_avx2,
    &moe_cpu_kernels_neon,
    &moe_cpu_kernels_scalar,
};

#define N_TABLES (sizeof all_tables / sizeof all_tables[0])

const moe_cpu_kernels *moe_cpu_kernels_select(const char *force)
{
    if (!force)
        force = getenv("MOE_CPU_ISA");
    for (size_t i = 0; i < N_TABLES; i++) {
        const moe_cpu_kernels *k = all_tables[i];
        if (!moe_cpu_kernels_usable(k))
            continue;
        if (!force || !force[0] || strcmp(force, k->name) == 0)
            return k;
    }
    return NULL;
}

int moe_cpu_kernels_all(const moe_cpu_kernels **out, int cap)
{
    int n = 0;
    for (size_t i = N_TABLES; i-- > 0;)
        if (moe_cpu_kernels_usable(all_tables[i]) && n < cap)
            out[n++] = all_tables[i];
    return n;
}

moe_type moe_cpu_vec_type(moe_type t)
{
    switch (t) {
    case MOE_TYPE_Q8_0:
    case MOE_TYPE_Q4_0:
        return MOE_TYPE_Q8_0;
    case MOE_TYPE_Q4_K:
    case MOE_TYPE_Q6_K:
        return MOE_CPU_TYPE_Q8_K;
    default:
        return MOE_TYPE_F32;
    }
}

moe_mm_fn moe_cpu_mm_for(const moe_cpu_kernels *k, moe_type t)
{
    switch (t) {
    case MOE_TYPE_F32:  return k->mm_f32;
    case MOE_TYPE_F16:  return k->mm_f16;
    case MOE_TYPE_BF16: return k->mm_bf16;
    case MOE_TYPE_Q8_0: return k->mm_q8_0;
    case MOE_TYPE_Q4_0: return k->mm_q4_0;
    case MOE_TYPE_Q4_K: return k->mm_q4_k;
    case MOE_TYPE_Q6_K: return k->mm_q6_k;
    default:            return NULL;
    }
}

size_t moe_cpu_vec_row_bytes(moe_type t, int64_t n)
{
    switch ((int)moe_cpu_vec_type(t)) {
    case MOE_TYPE_Q8_0:
        return (size_t)(n / MOE_QK8_0) * sizeof(moe_block_q8_0);
    case MOE_CPU_TYPE_Q8_K:
        return (size_t)(n / MOE_QK_K) * sizeof(moe_block_q8_k);
    default:
        return (size_t)n * sizeof(float);
    }
}

void moe_cpu_quantize_vec(const moe_cpu_kernels *k, moe_type t, const float *x,
                          void *y, int64_t n)
{
    switch ((int)moe_cpu_vec_type(t)) {
    case MOE_TYPE_Q8_0:
        k->quantize_q8_0(x, y, n);
        break;
    case MOE_CPU_TYPE_Q8_K:
        k->quantize_q8_k(x, y, n);
        break;
    default:
        if ((const void *)x != y)
            memcpy(y, x, (size_t)n * sizeof(float));
        break;
    }
}
