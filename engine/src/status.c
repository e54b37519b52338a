/*
 * status.c — status names, the library version and moe_fail(), the one
 * place error messages are formatted. Kept apart so every other file can
 * report errors the same way without repeating the vsnprintf dance.
 */
#include "util.h"

#include <stdio.h>

#ifndef MOE_VERSION_STRING
#define MOE_VERSION_STRING "0.0.0"
#endif

const char *moe_status_str(moe_status status)
{
    switch (status) {
    case MOE_OK:              return "ok";
    case MOE_ERR_IO:          return "I/O error";
    case MOE_ERR_FORMAT:      return "format error";
    case MOE_ERR_UNSUPPORTED: return "unsupported";
    case MOE_ERR_INVALID_ARG: return "invalid argument";
    case MOE_ERR_NOMEM:       return "out of memory";
    case MOE_ERR_RANGE:       return "out of range";
    case MOE_ERR_NOT_FOUND:   return "not found";
    }
    return "unknown status";
}

const char *moe_version(void)
{
    return MOE_VERSION_STRING;
}

moe_status moe_fail(moe_err *err, moe_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}
