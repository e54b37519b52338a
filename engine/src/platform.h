/*
 * platform.h — the few operating-system services the engine needs, behind
 * one portable interface: map a whole file read-only, learn a file's size,
 * open a file for stdio with a UTF-8 path, and replace or remove a file.
 * POSIX uses open/fstat/mmap/rename; Windows uses CreateFileW,
 * CreateFileMapping/MapViewOfFile and MoveFileExW (paths are UTF-8 on every
 * platform and are converted to UTF-16 for Win32). Every fallible call names
 * the path and the system's reason in `err`. Not part of the public API.
 */
#ifndef MOE_PLATFORM_H
#define MOE_PLATFORM_H

#include "moe.h"

#include <stdint.h>
#include <stdio.h>

/* A read-only mapping of a whole file. `data` is NULL when the file is
 * empty (nothing is mapped then). The other fields are private. */
typedef struct moe_platform_map {
    const void *data;
    uint64_t    size;
#ifdef _WIN32
    void *file_handle;    /* HANDLE of the open file, or NULL */
    void *mapping_handle; /* HANDLE of the file mapping, or NULL */
#endif
} moe_platform_map;

/* Maps `path` read-only into memory. On success `*map` owns the mapping;
 * release it with moe_platform_unmap_file. On failure `*map` is zeroed. */
moe_status moe_platform_map_file(const char *path, moe_platform_map *map, moe_err *err);
/* Releases a mapping; a zeroed map is a no-op. Leaves `*map` zeroed. */
void       moe_platform_unmap_file(moe_platform_map *map);

/* Size in bytes of the regular file `path`. */
moe_status moe_platform_file_size(const char *path, uint64_t *out, moe_err *err);
/* True if `path` names something that exists. */
int        moe_platform_file_exists(const char *path);

/* fopen() with a UTF-8 path (on Windows through _wfopen). NULL with errno
 * set on failure. `mode` is a stdio mode string such as "wb". */
FILE      *moe_platform_fopen(const char *path, const char *mode);
/* Renames `from` to `to`, replacing `to` if it exists. */
moe_status moe_platform_rename_file(const char *from, const char *to, moe_err *err);
/* Removes a file; errors are ignored (used to clean up after a failure). */
void       moe_platform_remove_file(const char *path);

#endif /* MOE_PLATFORM_H */
