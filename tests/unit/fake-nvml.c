/*
 * fake-nvml.c — a stand-in for the NVIDIA driver's libnvidia-ml.so.1 /
 * nvml.dll, built as a loadable module so test-hwprobe can exercise the
 * probe's real NVML path (dlopen/LoadLibrary, symbol lookup, the calls)
 * on a machine without an NVIDIA GPU, by pointing MOEDESK_NVML_PATH at it.
 *
 * It reports FAKE_NVML_COUNT (default 1) "NVIDIA GeForce RTX 4090" GPUs with
 * 24 GiB of memory of which 23 GiB free, driver "560.94", drawing 350 W.
 * FAKE_NVML_INIT_FAIL=1 makes nvmlInit_v2 fail (code 9, "driver not
 * loaded"), as on a machine whose driver is installed but not running.
 * Signatures follow NVIDIA's public NVML documentation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#define FAKE_EXPORT __declspec(dllexport)
#else
#define FAKE_EXPORT __attribute__((visibility("default")))
#endif

typedef struct fake_memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} fake_memory;

static int g_initialised;

FAKE_EXPORT int nvmlInit_v2(void);
FAKE_EXPORT int nvmlShutdown(void);
FAKE_EXPORT int nvmlDeviceGetCount_v2(unsigned int *count);
FAKE_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
FAKE_EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned int length);
FAKE_EXPORT int nvmlDeviceGetMemoryInfo(void *device, fake_memory *memory);
FAKE_EXPORT int nvmlSystemGetDriverVersion(char *version, unsigned int length);
FAKE_EXPORT int nvmlDeviceGetPowerUsage(void *device, unsigned int *milliwatts);

static unsigned int fake_count(void)
{
    const char *s = getenv("FAKE_NVML_COUNT");
    return s ? (unsigned int)strtoul(s, NULL, 10) : 1u;
}

int nvmlInit_v2(void)
{
    const char *fail = getenv("FAKE_NVML_INIT_FAIL");
    if (fail && fail[0] == '1')
        return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
    g_initialised = 1;
    return 0;
}

int nvmlShutdown(void)
{
    if (!g_initialised)
        return 1; /* NVML_ERROR_UNINITIALIZED */
    g_initialised = 0;
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!g_initialised)
        return 1;
    if (!count)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *count = fake_count();
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
    if (!g_initialised)
        return 1;
    if (!device || index >= fake_count())
        return 2;
    *device = (void *)(size_t)(index + 1);
    return 0;
}

int nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
    if (!device || !name || length < 24)
        return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    snprintf(name, length, "%s", "NVIDIA GeForce RTX 4090");
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *device, fake_memory *memory)
{
    if (!device || !memory)
        return 2;
    memory->total = 24ull << 30;
    memory->free = 23ull << 30;
    memory->used = memory->total - memory->free;
    return 0;
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!version || length < 7)
        return 7;
    snprintf(version, length, "%s", "560.94");
    return 0;
}

int nvmlDeviceGetPowerUsage(void *device, unsigned int *milliwatts)
{
    if (!device || !milliwatts)
        return 2;
    *milliwatts = 350000;
    return 0;
}
