/*
 * fuzz-machine.c — libFuzzer target for the machine-file parser
 * (moe_machine_parse): any bytes must give MOE_OK or a format error with a
 * message, never a crash, a read past the input or an invariant broken on
 * success (free <= total, at most MOE_HW_MAX_GPUS GPUs, cores ordered,
 * strings terminated). Seeds: tests/data/machines.
 */
#include "moe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    moe_machine m;
    moe_err err = {{0}};
    /* a private copy, so a read past `size` is caught by ASan */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    const moe_status st = moe_machine_parse(copy, size, "fuzz", &m, &err);
    if (st == MOE_OK) {
        if (m.ram_free_bytes > m.ram_total_bytes || m.n_gpus < 0 || m.n_gpus > MOE_HW_MAX_GPUS ||
            m.n_cores_physical > m.n_cores_logical || m.n_cores_physical < 1 ||
            memchr(m.name, 0, sizeof m.name) == NULL || memchr(m.cpu_name, 0, sizeof m.cpu_name) == NULL)
            abort();
        for (int i = 0; i < m.n_gpus; i++)
            if (m.gpus[i].vram_free_bytes > m.gpus[i].vram_total_bytes ||
                memchr(m.gpus[i].name, 0, sizeof m.gpus[i].name) == NULL)
                abort();
    } else if (st != MOE_ERR_FORMAT || err.msg[0] == '\0') {
        abort();
    }
    free(copy);
    return 0;
}
