/*
 * hw-check.c — the hardware probe against the real NVIDIA driver, for the
 * GPU machine (tests/gpu/run.sh). Prints what moe_hw_probe found, then
 * compares every GPU with the line nvidia-smi gave for it:
 *
 *   hw-check "NAME, MEMORY_TOTAL_MIB, DRIVER" ...   (one argument per GPU,
 *            from nvidia-smi --query-gpu=name,memory.total,driver_version
 *            --format=csv,noheader,nounits)
 *
 * Exit 0 only when the probe saw the same number of GPUs with the same
 * names, total memory (to the MiB), driver version, a plausible free
 * memory and a non-zero power draw.
 */
#include <moe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    size_t i = 0;
    while (s[i] == ' ')
        i++;
    memmove(s, s + i, strlen(s + i) + 1);
}

int main(int argc, char **argv)
{
    moe_machine m;
    moe_err err = {{0}};
    if (moe_hw_probe_system(&m, &err) != MOE_OK) {
        printf("FAIL: probe: %s\n", err.msg);
        return 1;
    }
    printf("cpu: %s, %d logical / %d physical cores, RAM %.1f GiB (%.1f free)\n", m.cpu_name,
           m.n_cores_logical, m.n_cores_physical, m.ram_total_bytes / 1073741824.0,
           m.ram_free_bytes / 1073741824.0);
    printf("gpus: %d (%s)\n", m.n_gpus, m.gpu_note);
    for (int i = 0; i < m.n_gpus; i++)
        printf("  gpu %d: %s, driver %s, %.0f MiB total, %.0f MiB free, %.1f W, compute %d\n", i,
               m.gpus[i].name, m.gpus[i].driver, m.gpus[i].vram_total_bytes / 1048576.0,
               m.gpus[i].vram_free_bytes / 1048576.0, m.gpus[i].power_watts, m.gpus[i].compute);
    int failed = 0;
    if (m.n_gpus != argc - 1) {
        printf("FAIL: nvidia-smi lists %d GPUs, the probe %d\n", argc - 1, m.n_gpus);
        failed++;
    }
    for (int i = 1; i < argc && i - 1 < m.n_gpus; i++) {
        char line[512];
        snprintf(line, sizeof line, "%s", argv[i]);
        char *name = strtok(line, ","), *mem = strtok(NULL, ","), *drv = strtok(NULL, ",");
        if (!name || !mem || !drv) {
            printf("FAIL: cannot read nvidia-smi line '%s'\n", argv[i]);
            failed++;
            continue;
        }
        trim(name);
        trim(mem);
        trim(drv);
        const moe_gpu_info *g = &m.gpus[i - 1];
        long long mib = atoll(mem);
        long long got = (long long)(g->vram_total_bytes / 1048576);
        if (strcmp(name, g->name) != 0) {
            printf("FAIL: gpu %d name '%s' vs nvidia-smi '%s'\n", i - 1, g->name, name);
            failed++;
        }
        if (got != mib) {
            printf("FAIL: gpu %d total %lld MiB vs nvidia-smi %lld MiB\n", i - 1, got, mib);
            failed++;
        }
        if (strcmp(drv, g->driver) != 0) {
            printf("FAIL: gpu %d driver '%s' vs nvidia-smi '%s'\n", i - 1, g->driver, drv);
            failed++;
        }
        if (g->vram_free_bytes == 0 || g->vram_free_bytes > g->vram_total_bytes) {
            printf("FAIL: gpu %d free memory %llu is not plausible\n", i - 1,
                   (unsigned long long)g->vram_free_bytes);
            failed++;
        }
        if (!(g->power_watts > 0)) {
            printf("FAIL: gpu %d power draw %.1f W\n", i - 1, g->power_watts);
            failed++;
        }
        if (!g->compute) {
            printf("FAIL: gpu %d not marked usable for compute\n", i - 1);
            failed++;
        }
    }
    printf("%s: hardware probe vs nvidia-smi (%d mismatches)\n", failed ? "FAIL" : "OK", failed);
    return failed ? 1 : 0;
}
