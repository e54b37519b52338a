/*
 * hwprobe.c — describes the machine the engine runs on: CPU model name and
 * SIMD features, logical and physical cores, total and available RAM; the
 * GPUs come from hwprobe-gpu.c. The memory planner and the CPU backend's
 * kernel choice read the result.
 *
 * Sources, by platform:
 *   x86 CPU      cpuid (leaves 1, 7.0, 7.1, 0x80000002-4) and XGETBV, so a
 *                feature counts only when the OS saves its registers
 *   ARM CPU      NEON is part of AArch64; dotprod from getauxval (Linux) or
 *                IsProcessorFeaturePresent (Windows)
 *   cores, RAM   Linux: sysconf, /proc/cpuinfo (distinct physical/core id
 *                pairs), /proc/meminfo (MemTotal, MemAvailable);
 *                Windows: GetLogicalProcessorInformationEx,
 *                GlobalMemoryStatusEx; other POSIX: sysconf
 * Every read is bounded (fixed line buffers, at most 4096 distinct cores
 * remembered) and a source that cannot be read leaves a safe default.
 */
#include "hwprobe.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#define MOE_HW_X86 1
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#include <sys/auxv.h>
#endif

static const char *const k_feature_names[MOE_CPU_FEATURE_COUNT] = {
    "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
    "avx512_vnni", "avx_vnni", "avx512_bf16", "neon", "dotprod",
};

const char *moe_cpu_feature_name(moe_cpu_feature feature)
{
    for (int i = 0; i < MOE_CPU_FEATURE_COUNT; i++)
        if ((uint32_t)feature == (1u << i))
            return k_feature_names[i];
    return NULL;
}

bool moe_cpu_feature_from_name(const char *name, moe_cpu_feature *out)
{
    if (!name)
        return false;
    for (int i = 0; i < MOE_CPU_FEATURE_COUNT; i++)
        if (strcmp(name, k_feature_names[i]) == 0) {
            if (out)
                *out = (moe_cpu_feature)(1u << i);
            return true;
        }
    return false;
}

/* Copies `src` into dst without leading/trailing blanks and with runs of
 * blanks collapsed (cpuid brand strings are padded). */
static void copy_trimmed(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    bool space = false;
    for (; *src && n + 1 < cap; src++) {
        if (*src == ' ' || *src == '\t' || *src == '\n' || *src == '\r') {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < cap)
            dst[n++] = ' ';
        space = false;
        dst[n++] = *src;
    }
    dst[n] = '\0';
}

#ifdef MOE_HW_X86
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void probe_cpu_x86(moe_machine *m)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const unsigned ecx1 = c;
    uint32_t f = 0;
    if (ecx1 & (1u << 20))
        f |= MOE_CPU_SSE42;
    /* AVX state (XMM|YMM) and AVX-512 state (opmask, ZMM) saved by the OS. */
    const bool osxsave = (ecx1 & (1u << 27)) != 0;
    const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    const bool avx_os = (xcr0 & 0x6) == 0x6;
    const bool avx512_os = avx_os && (xcr0 & 0xE0) == 0xE0;
    if (avx_os) {
        if (ecx1 & (1u << 28))
            f |= MOE_CPU_AVX;
        if (ecx1 & (1u << 12))
            f |= MOE_CPU_FMA;
        if (ecx1 & (1u << 29))
            f |= MOE_CPU_F16C;
    }
    const unsigned max_leaf = (unsigned)__get_cpuid_max(0, NULL);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        const unsigned ebx7 = b, ecx7 = c, sub_leaves = a;
        if (avx_os && (ebx7 & (1u << 5)))
            f |= MOE_CPU_AVX2;
        if (avx512_os) {
            if (ebx7 & (1u << 16))
                f |= MOE_CPU_AVX512F;
            if (ebx7 & (1u << 30))
                f |= MOE_CPU_AVX512BW;
            if (ebx7 & (1u << 31))
                f |= MOE_CPU_AVX512VL;
            if (ecx7 & (1u << 11))
                f |= MOE_CPU_AVX512_VNNI;
        }
        if (sub_leaves >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            if (avx_os && (a & (1u << 4)))
                f |= MOE_CPU_AVX_VNNI;
            if (avx512_os && (a & (1u << 5)))
                f |= MOE_CPU_AVX512_BF16;
        }
    }
    m->cpu_features = f;

    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        unsigned regs[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &regs[i * 4], &regs[i * 4 + 1], &regs[i * 4 + 2],
                        &regs[i * 4 + 3]);
        char brand[49];
        memcpy(brand, regs, 48);
        brand[48] = '\0';
        copy_trimmed(m->cpu_name, sizeof m->cpu_name, brand);
    }
}
#endif

#if defined(__aarch64__) || defined(_M_ARM64)
static void probe_cpu_arm(moe_machine *m)
{
    m->cpu_features |= MOE_CPU_NEON; /* mandatory in AArch64 */
#if defined(__linux__)
    const unsigned long hwcap = getauxval(AT_HWCAP);
    if (hwcap & (1ul << 20)) /* HWCAP_ASIMDDP */
        m->cpu_features |= MOE_CPU_DOTPROD;
#elif defined(_WIN32)
    if (IsProcessorFeaturePresent(43)) /* PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE */
        m->cpu_features |= MOE_CPU_DOTPROD;
#endif
}
#endif

#ifdef _WIN32
static void probe_cores_ram_win32(moe_machine *m)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    m->n_cores_logical = (int32_t)si.dwNumberOfProcessors;
    DWORD len = 0;
    GetLogicalProcessorInformationEx(RelationProcessorCore, NULL, &len);
    if (len > 0 && len < (1u << 24)) {
        char *buf = malloc(len);
        if (buf && GetLogicalProcessorInformationEx(
                       RelationProcessorCore, (PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX)buf, &len)) {
            int32_t cores = 0, threads = 0;
            for (DWORD off = 0; off + sizeof(DWORD) * 2 <= len;) {
                PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX e =
                    (PSYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX)(buf + off);
                if (e->Size == 0 || off + e->Size > len)
                    break;
                /* A core lives in one processor group: GroupMask[0]. */
                if (e->Relationship == RelationProcessorCore) {
                    cores++;
                    if (e->Processor.GroupCount >= 1)
                        threads += __builtin_popcountll((unsigned long long)e->Processor.GroupMask[0].Mask);
                }
                off += e->Size;
            }
            if (cores > 0)
                m->n_cores_physical = cores;
            if (threads > m->n_cores_logical)
                m->n_cores_logical = threads;
        }
        free(buf);
    }
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms)) {
        m->ram_total_bytes = ms.ullTotalPhys;
        m->ram_free_bytes = ms.ullAvailPhys;
    }
}
#else
/* Value of a "Key: 123 kB" line of /proc/meminfo, in bytes; 0 if absent. */
static uint64_t meminfo_bytes(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    while (p && p != text && p[-1] != '\n')
        p = strstr(p + 1, key);
    if (!p)
        return 0;
    p += strlen(key);
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9' && v < (UINT64_C(1) << 50))
        v = v * 10 + (uint64_t)(*p++ - '0');
    return v * 1024;
}

/* Reads at most cap-1 bytes of a small text file; "" on failure. */
static void read_small_file(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Physical cores (distinct physical id/core id pairs) and, if the brand
 * is still unknown, the "model name" line, from /proc/cpuinfo. */
static void probe_cpuinfo(moe_machine *m)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    const size_t max_cores = 4096;
    uint32_t *pairs = malloc(max_cores * sizeof *pairs);
    size_t n_pairs = 0;
    long phys = 0;
    char line[512];
    while (pairs && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (!colon)
            continue;
        if (strncmp(line, "physical id", 11) == 0)
            phys = strtol(colon + 1, NULL, 10);
        else if (strncmp(line, "core id", 7) == 0) {
            const uint32_t key = ((uint32_t)(phys & 0xFFFF) << 16) |
                                 (uint32_t)(strtol(colon + 1, NULL, 10) & 0xFFFF);
            bool seen = false;
            for (size_t i = 0; i < n_pairs && !seen; i++)
                seen = pairs[i] == key;
            if (!seen && n_pairs < max_cores)
                pairs[n_pairs++] = key;
        } else if (!m->cpu_name[0] && strncmp(line, "model name", 10) == 0)
            copy_trimmed(m->cpu_name, sizeof m->cpu_name, colon + 1);
    }
    fclose(f);
    if (n_pairs > 0)
        m->n_cores_physical = (int32_t)n_pairs;
    free(pairs);
}

static void probe_cores_ram_posix(moe_machine *m)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > 0 && n < (1L << 20))
        m->n_cores_logical = (int32_t)n;
#ifdef __linux__
    probe_cpuinfo(m);
    char text[8192];
    read_small_file("/proc/meminfo", text, sizeof text);
    m->ram_total_bytes = meminfo_bytes(text, "MemTotal:");
    m->ram_free_bytes = meminfo_bytes(text, "MemAvailable:");
    if (m->ram_free_bytes == 0)
        m->ram_free_bytes = meminfo_bytes(text, "MemFree:") + meminfo_bytes(text, "Cached:");
#endif
    if (m->ram_total_bytes == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0)
            m->ram_total_bytes = (uint64_t)pages * (uint64_t)page;
    }
}
#endif

moe_status moe_hw_probe_system(moe_machine *out, moe_err *err)
{
    if (!out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_hw_probe_system: NULL machine");
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "this machine");
    out->n_cores_logical = 1;
#ifdef MOE_HW_X86
    probe_cpu_x86(out);
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
    probe_cpu_arm(out);
#endif
#ifdef _WIN32
    probe_cores_ram_win32(out);
#else
    probe_cores_ram_posix(out);
#endif
    if (out->n_cores_logical < 1)
        out->n_cores_logical = 1;
    if (out->n_cores_physical < 1 || out->n_cores_physical > out->n_cores_logical)
        out->n_cores_physical = out->n_cores_logical;
    if (out->ram_free_bytes > out->ram_total_bytes)
        out->ram_free_bytes = out->ram_total_bytes;
    if (!out->cpu_name[0])
        snprintf(out->cpu_name, sizeof out->cpu_name, "unknown CPU");
    if (out->ram_total_bytes == 0)
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "hardware probe: cannot read the RAM size");
    moe_hwprobe_gpus(out);
    return MOE_OK;
}

moe_status moe_hw_probe(moe_machine *out, moe_err *err)
{
    const char *file = getenv("MOEDESK_MACHINE");
    if (file && file[0])
        return moe_machine_load(file, out, err);
    return moe_hw_probe_system(out, err);
}
