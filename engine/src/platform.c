/*
 * platform.c — POSIX and Win32 implementations of platform.h: read-only
 * whole-file mappings, file sizes, stdio with UTF-8 paths, replace-rename
 * and remove. Kept in one file so the rest of the engine never needs an
 * #ifdef _WIN32. Windows paths arrive as UTF-8 and are converted to UTF-16
 * so names outside the ANSI code page work.
 */
#include "platform.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#ifdef _WIN32

/* UTF-8 to a malloc'd UTF-16 string; NULL if invalid or out of memory. */
static wchar_t *platform_widen(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0)
        return NULL;
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        return NULL;
    }
    return w;
}

/* Writes "path: what: <system text>" for GetLastError() into err. */
static moe_status platform_fail_win(moe_err *err, const char *path, const char *what)
{
    DWORD code = GetLastError();
    char text[256] = "";
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                             NULL, code, 0, text, (DWORD)sizeof text, NULL);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' '))
        text[--n] = '\0';
    return moe_fail(err, MOE_ERR_IO, "%s: %s: %s (Windows error %lu)", path, what,
                    n ? text : "unknown error", (unsigned long)code);
}

static HANDLE platform_open_read(const char *path, moe_err *err)
{
    wchar_t *wpath = platform_widen(path);
    if (!wpath) {
        moe_fail(err, MOE_ERR_INVALID_ARG, "%s: path is not valid UTF-8", path);
        return INVALID_HANDLE_VALUE;
    }
    HANDLE h = CreateFileW(wpath, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    free(wpath);
    if (h == INVALID_HANDLE_VALUE)
        platform_fail_win(err, path, "cannot open");
    return h;
}

moe_status moe_platform_map_file(const char *path, moe_platform_map *map, moe_err *err)
{
    memset(map, 0, sizeof *map);
    HANDLE file = platform_open_read(path, err);
    if (file == INVALID_HANDLE_VALUE)
        return MOE_ERR_IO;
    LARGE_INTEGER size;
    if (!GetFileSizeEx(file, &size)) {
        moe_status st = platform_fail_win(err, path, "cannot read file size");
        CloseHandle(file);
        return st;
    }
    if (size.QuadPart == 0) { /* an empty file cannot be mapped */
        CloseHandle(file);
        return MOE_OK;
    }
    if ((uint64_t)size.QuadPart > (uint64_t)SIZE_MAX) {
        CloseHandle(file);
        return moe_fail(err, MOE_ERR_RANGE, "%s: file too large to map", path);
    }
    HANDLE mapping = CreateFileMappingW(file, NULL, PAGE_READONLY, 0, 0, NULL);
    const void *data = mapping ? MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0) : NULL;
    if (!data) {
        moe_status st = platform_fail_win(err, path, "cannot map");
        if (mapping)
            CloseHandle(mapping);
        CloseHandle(file);
        return st;
    }
    map->data = data;
    map->size = (uint64_t)size.QuadPart;
    map->file_handle = file;
    map->mapping_handle = mapping;
    return MOE_OK;
}

void moe_platform_unmap_file(moe_platform_map *map)
{
    if (!map)
        return;
    if (map->data)
        UnmapViewOfFile(map->data);
    if (map->mapping_handle)
        CloseHandle(map->mapping_handle);
    if (map->file_handle)
        CloseHandle(map->file_handle);
    memset(map, 0, sizeof *map);
}

moe_status moe_platform_file_size(const char *path, uint64_t *out, moe_err *err)
{
    HANDLE file = platform_open_read(path, err);
    if (file == INVALID_HANDLE_VALUE)
        return MOE_ERR_IO;
    LARGE_INTEGER size;
    moe_status st = MOE_OK;
    if (GetFileSizeEx(file, &size))
        *out = (uint64_t)size.QuadPart;
    else
        st = platform_fail_win(err, path, "cannot read file size");
    CloseHandle(file);
    return st;
}

int moe_platform_file_exists(const char *path)
{
    wchar_t *wpath = platform_widen(path);
    if (!wpath)
        return 0;
    DWORD attr = GetFileAttributesW(wpath);
    free(wpath);
    return attr != INVALID_FILE_ATTRIBUTES;
}

FILE *moe_platform_fopen(const char *path, const char *mode)
{
    wchar_t *wpath = platform_widen(path);
    wchar_t *wmode = platform_widen(mode);
    FILE *f = NULL;
    if (wpath && wmode)
        f = _wfopen(wpath, wmode);
    else
        errno = EINVAL;
    free(wpath);
    free(wmode);
    return f;
}

moe_status moe_platform_rename_file(const char *from, const char *to, moe_err *err)
{
    wchar_t *wfrom = platform_widen(from);
    wchar_t *wto = platform_widen(to);
    moe_status st = MOE_OK;
    if (!wfrom || !wto)
        st = moe_fail(err, MOE_ERR_INVALID_ARG, "%s: path is not valid UTF-8", to);
    else if (!MoveFileExW(wfrom, wto, MOVEFILE_REPLACE_EXISTING))
        st = platform_fail_win(err, to, "cannot rename temporary file onto it");
    free(wfrom);
    free(wto);
    return st;
}

void moe_platform_remove_file(const char *path)
{
    wchar_t *wpath = platform_widen(path);
    if (wpath)
        DeleteFileW(wpath);
    free(wpath);
}

#else /* POSIX */

moe_status moe_platform_map_file(const char *path, moe_platform_map *map, moe_err *err)
{
    memset(map, 0, sizeof *map);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return moe_fail(err, MOE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return moe_fail(err, MOE_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return moe_fail(err, MOE_ERR_IO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size > (uint64_t)SIZE_MAX) {
        close(fd);
        return moe_fail(err, MOE_ERR_RANGE, "%s: file too large to map", path);
    }
    void *data = NULL;
    if (size > 0) { /* mmap rejects length 0; an empty file maps to NULL */
        data = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        if (data == MAP_FAILED) {
            int e = errno;
            close(fd);
            return moe_fail(err, MOE_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
    }
    close(fd); /* the mapping keeps the file referenced */
    map->data = data;
    map->size = size;
    return MOE_OK;
}

void moe_platform_unmap_file(moe_platform_map *map)
{
    if (!map)
        return;
    if (map->data)
        munmap((void *)map->data, (size_t)map->size);
    memset(map, 0, sizeof *map);
}

moe_status moe_platform_file_size(const char *path, uint64_t *out, moe_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return moe_fail(err, MOE_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return moe_fail(err, MOE_ERR_IO, "%s: not a regular file", path);
    *out = (uint64_t)st.st_size;
    return MOE_OK;
}

int moe_platform_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

FILE *moe_platform_fopen(const char *path, const char *mode)
{
    return fopen(path, mode);
}

moe_status moe_platform_rename_file(const char *from, const char *to, moe_err *err)
{
    if (rename(from, to) != 0)
        return moe_fail(err, MOE_ERR_IO, "%s: cannot rename temporary file onto it: %s",
                        to, strerror(errno));
    return MOE_OK;
}

void moe_platform_remove_file(const char *path)
{
    remove(path);
}

#endif
