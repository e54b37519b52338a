/*
 * hwprobe.h — the pieces of the hardware probe shared between its files:
 * hwprobe.c (CPU, cores, RAM, the public entry points) and hwprobe-gpu.c
 * (NVIDIA GPUs through NVML loaded at run time, Windows adapters through
 * DXGI). Not part of the public API.
 */
#ifndef MOE_HWPROBE_H
#define MOE_HWPROBE_H

#include "moe.h"

/* Adds the GPUs this machine has to m->gpus (after any already there) and
 * writes m->gpu_note. Never fails: a missing driver means no GPUs. Reads
 * MOEDESK_NVML_PATH for the NVML library to load. */
void moe_hwprobe_gpus(moe_machine *m);

#endif /* MOE_HWPROBE_H */
