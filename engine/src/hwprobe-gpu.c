/*
 * hwprobe-gpu.c — finds the machine's GPUs without linking to any vendor
 * library, so one build runs with or without an NVIDIA driver:
 *
 *   NVML   the NVIDIA driver's management library, loaded at run time
 *          (libnvidia-ml.so.1 / nvml.dll, or MOEDESK_NVML_PATH). Gives each
 *          GPU's name, total and free memory, power draw and the driver
 *          version. These GPUs are the ones the CUDA backend can use.
 *   DXGI   (Windows only) every hardware display adapter with its dedicated
 *          memory, for the adapters NVML does not cover (other vendors, or
 *          an NVIDIA card whose NVML is missing). Listed for information:
 *          the CUDA backend cannot use them, so compute is false.
 *
 * The few NVML types and signatures used are declared here from NVIDIA's
 * public API documentation (no NVIDIA header is needed). A missing library,
 * a missing symbol or a failing call is never an error: it just means fewer
 * GPUs, and gpu_note says what happened.
 */
#include "hwprobe.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#define COBJMACROS
#include <windows.h>
#include <dxgi.h>
#else
#include <dlfcn.h>
#endif

/* ---- NVML, as documented (nvml.h is not included) ---------------------- */

typedef int nvml_return;                      /* nvmlReturn_t; 0 = success */
typedef struct nvml_device_opaque *nvml_device; /* nvmlDevice_t            */
typedef struct nvml_memory {                  /* nvmlMemory_t (v1)         */
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvml_memory;

typedef nvml_return (*nvml_init_fn)(void);
typedef nvml_return (*nvml_count_fn)(unsigned int *count);
typedef nvml_return (*nvml_handle_fn)(unsigned int index, nvml_device *device);
typedef nvml_return (*nvml_name_fn)(nvml_device device, char *name, unsigned int length);
typedef nvml_return (*nvml_memory_fn)(nvml_device device, nvml_memory *memory);
typedef nvml_return (*nvml_driver_fn)(char *version, unsigned int length);
typedef nvml_return (*nvml_power_fn)(nvml_device device, unsigned int *milliwatts);
typedef nvml_return (*nvml_shutdown_fn)(void);

typedef struct nvml_api {
    nvml_init_fn     init;
    nvml_count_fn    count;
    nvml_handle_fn   handle;
    nvml_name_fn     name;
    nvml_memory_fn   memory;
    nvml_driver_fn   driver;
    nvml_power_fn    power;
    nvml_shutdown_fn shutdown;
} nvml_api;

/* Generic function pointer type: converting through it is how the C
 * standard and GCC's -Wcast-function-type expect symbol lookups cast. */
typedef void (*any_fn)(void);

#ifdef _WIN32
typedef HMODULE lib_handle;

static lib_handle lib_open(const char *path)
{
    return LoadLibraryA(path);
}

static any_fn lib_sym(lib_handle lib, const char *name)
{
    return (any_fn)(void *)GetProcAddress(lib, name);
}

static void lib_close(lib_handle lib)
{
    FreeLibrary(lib);
}
#else
typedef void *lib_handle;

static lib_handle lib_open(const char *path)
{
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static any_fn lib_sym(lib_handle lib, const char *name)
{
    any_fn fn;
    void *p = dlsym(lib, name);
    /* POSIX guarantees a data pointer from dlsym converts to a function. */
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

static void lib_close(lib_handle lib)
{
    dlclose(lib);
}
#endif

/* Opens NVML: the MOEDESK_NVML_PATH library if set, else the driver's. */
static lib_handle nvml_open(const char **tried)
{
    const char *path = getenv("MOEDESK_NVML_PATH");
    if (path && path[0]) {
        *tried = path;
        return lib_open(path);
    }
#ifdef _WIN32
    *tried = "nvml.dll";
    lib_handle lib = lib_open("nvml.dll");
    if (!lib) {
        /* Drivers before 2019 kept it beside nvidia-smi only. */
        char full[MAX_PATH];
        DWORD n = ExpandEnvironmentStringsA("%ProgramW6432%\\NVIDIA Corporation\\NVSMI\\nvml.dll",
                                            full, sizeof full);
        if (n > 0 && n <= sizeof full)
            lib = lib_open(full);
    }
    return lib;
#else
    *tried = "libnvidia-ml.so.1";
    return lib_open("libnvidia-ml.so.1");
#endif
}

static bool nvml_resolve(lib_handle lib, nvml_api *api, const char **missing)
{
    static const char *const names[8] = {
        "nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo", "nvmlSystemGetDriverVersion",
        "nvmlDeviceGetPowerUsage", "nvmlShutdown",
    };
    any_fn fns[8];
    for (int i = 0; i < 8; i++) {
        fns[i] = lib_sym(lib, names[i]);
        if (!fns[i]) {
            *missing = names[i];
            return false;
        }
    }
    api->init = (nvml_init_fn)fns[0];
    api->count = (nvml_count_fn)fns[1];
    api->handle = (nvml_handle_fn)fns[2];
    api->name = (nvml_name_fn)fns[3];
    api->memory = (nvml_memory_fn)fns[4];
    api->driver = (nvml_driver_fn)fns[5];
    api->power = (nvml_power_fn)fns[6];
    api->shutdown = (nvml_shutdown_fn)fns[7];
    return true;
}

/* Adds NVML's GPUs; returns how many. */
static int probe_nvml(moe_machine *m)
{
    const char *tried = "";
    lib_handle lib = nvml_open(&tried);
    if (!lib) {
        snprintf(m->gpu_note, sizeof m->gpu_note, "NVML: %s not found (no NVIDIA driver)", tried);
        return 0;
    }
    nvml_api api;
    const char *missing = "";
    if (!nvml_resolve(lib, &api, &missing)) {
        snprintf(m->gpu_note, sizeof m->gpu_note, "NVML: %s lacks %s", tried, missing);
        lib_close(lib);
        return 0;
    }
    nvml_return rc = api.init();
    if (rc != 0) {
        snprintf(m->gpu_note, sizeof m->gpu_note, "NVML: nvmlInit_v2 failed (code %d)", rc);
        lib_close(lib);
        return 0;
    }
    char driver[80] = "";
    if (api.driver(driver, sizeof driver) != 0)
        driver[0] = '\0';
    driver[sizeof driver - 1] = '\0';
    unsigned int count = 0;
    if (api.count(&count) != 0)
        count = 0;
    int added = 0;
    for (unsigned int i = 0; i < count && m->n_gpus < MOE_HW_MAX_GPUS; i++) {
        nvml_device dev = NULL;
        nvml_memory mem;
        if (api.handle(i, &dev) != 0 || api.memory(dev, &mem) != 0)
            continue;
        moe_gpu_info *g = &m->gpus[m->n_gpus];
        memset(g, 0, sizeof *g);
        char name[96] = "";
        if (api.name(dev, name, sizeof name) != 0)
            snprintf(name, sizeof name, "NVIDIA GPU %u", i);
        name[sizeof name - 1] = '\0';
        snprintf(g->name, sizeof g->name, "%s", name);
        snprintf(g->driver, sizeof g->driver, "%s", driver);
        g->vram_total_bytes = mem.total;
        g->vram_free_bytes = mem.free <= mem.total ? mem.free : mem.total;
        unsigned int mw = 0;
        g->power_watts = api.power(dev, &mw) == 0 ? mw / 1000.0 : 0.0;
        g->compute = true;
        g->source = MOE_GPU_SOURCE_NVML;
        m->n_gpus++;
        added++;
    }
    api.shutdown();
    lib_close(lib);
    snprintf(m->gpu_note, sizeof m->gpu_note, "NVML (%s): %d GPU%s, driver %s", tried, added,
             added == 1 ? "" : "s", driver[0] ? driver : "unknown");
    return added;
}

#ifdef _WIN32
/* IID_IDXGIFactory1, from the DXGI documentation; defined here so no
 * import library (dxguid) is needed. */
static const IID k_iid_dxgi_factory1 = {
    0x770aae78, 0xf26f, 0x4dba, {0xa8, 0x29, 0x25, 0x3c, 0x83, 0xd1, 0xb3, 0x87}};

typedef HRESULT(WINAPI *create_factory_fn)(REFIID riid, void **factory);

static void probe_dxgi(moe_machine *m, int nvml_gpus)
{
    HMODULE lib = LoadLibraryA("dxgi.dll");
    if (!lib)
        return;
    create_factory_fn create = (create_factory_fn)(any_fn)(void *)GetProcAddress(lib, "CreateDXGIFactory1");
    IDXGIFactory1 *factory = NULL;
    if (!create || FAILED(create(&k_iid_dxgi_factory1, (void **)&factory)) || !factory) {
        FreeLibrary(lib);
        return;
    }
    int added = 0;
    for (UINT i = 0; i < 64 && m->n_gpus < MOE_HW_MAX_GPUS; i++) {
        IDXGIAdapter1 *adapter = NULL;
        if (IDXGIFactory1_EnumAdapters1(factory, i, &adapter) != S_OK || !adapter)
            break;
        DXGI_ADAPTER_DESC1 desc;
        if (SUCCEEDED(IDXGIAdapter1_GetDesc1(adapter, &desc)) &&
            !(desc.Flags & DXGI_ADAPTER_FLAG_SOFTWARE) && desc.DedicatedVideoMemory > 0 &&
            !(desc.VendorId == 0x10DE && nvml_gpus > 0)) {
            moe_gpu_info *g = &m->gpus[m->n_gpus];
            memset(g, 0, sizeof *g);
            if (WideCharToMultiByte(CP_UTF8, 0, desc.Description, -1, g->name,
                                    (int)sizeof g->name, NULL, NULL) <= 0)
                snprintf(g->name, sizeof g->name, "display adapter %u", i);
            g->name[sizeof g->name - 1] = '\0';
            g->vram_total_bytes = desc.DedicatedVideoMemory;
            g->vram_free_bytes = desc.DedicatedVideoMemory;
            g->compute = false;
            g->source = MOE_GPU_SOURCE_DXGI;
            m->n_gpus++;
            added++;
        }
        IDXGIAdapter1_Release(adapter);
    }
    IDXGIFactory1_Release(factory);
    FreeLibrary(lib);
    if (added > 0) {
        size_t n = strlen(m->gpu_note);
        snprintf(m->gpu_note + n, sizeof m->gpu_note - n, "; DXGI: %d other adapter%s", added,
                 added == 1 ? "" : "s");
    }
}
#endif

void moe_hwprobe_gpus(moe_machine *m)
{
    int nvml_gpus = probe_nvml(m);
#ifdef _WIN32
    probe_dxgi(m, nvml_gpus);
#else
    (void)nvml_gpus;
#endif
}
