/*
 * library.h — where installed models live and what they may be called.
 *
 * Everything is under one data directory:
 *   $MOEDESK_DATA_DIR                       when set (tests, portable use)
 *   g_get_user_data_dir()/moedesk           otherwise: $XDG_DATA_HOME/moedesk
 *                                           (~/.local/share/moedesk) on Linux;
 *                                           on Windows GLib returns the local
 *                                           application-data folder
 *                                           (%LOCALAPPDATA%), and the folder
 *                                           is %LOCALAPPDATA%\MoeDesk
 * with one folder per model under `models/`.
 *
 * Model names are what users type, so they are checked before they become
 * paths: a name is `NAME` or `ORG/NAME`, each part 1..96 characters of
 * [A-Za-z0-9._-], not starting with '.' or '-', without "--" or "..". The
 * one mapping to a folder: '/' becomes "--" (the scheme Hugging Face's own
 * cache uses; Hugging Face forbids "--" in repository ids, so the mapping is
 * reversible). Nothing else can reach outside `models/`: no absolute paths,
 * no "..", no backslashes, no other separators. File paths inside a model
 * (from a hub listing: untrusted too) are checked by
 * moe_library_check_rel_path.
 */
#ifndef MOEDESK_LIBRARY_H
#define MOEDESK_LIBRARY_H

#include <glib.h>

G_BEGIN_DECLS

#define MOE_LIBRARY_ERROR (moe_library_error_quark())
GQuark moe_library_error_quark(void);

typedef enum {
    MOE_LIBRARY_ERROR_INVALID_NAME,  /* a model name or file path refused      */
    MOE_LIBRARY_ERROR_NOT_FOUND,     /* no such model, repository or file      */
    MOE_LIBRARY_ERROR_HTTP,          /* a server answered with an error status */
    MOE_LIBRARY_ERROR_NETWORK,       /* the connection failed after retries    */
    MOE_LIBRARY_ERROR_HASH_MISMATCH, /* sha256 of a download differs           */
    MOE_LIBRARY_ERROR_SIZE_MISMATCH, /* a download's size differs               */
    MOE_LIBRARY_ERROR_NO_SPACE,      /* not enough disk space (before or during) */
    MOE_LIBRARY_ERROR_BUSY,          /* another process is downloading the file */
    MOE_LIBRARY_ERROR_CORRUPT,       /* a manifest, listing or header is bad   */
    MOE_LIBRARY_ERROR_IO,            /* a local file operation failed          */
    MOE_LIBRARY_ERROR_TOO_BIG,       /* no quantisation fits the machine       */
} MoeLibraryError;

/* The data directory (see above); newly allocated. Not created. */
char *moe_library_data_dir(void);
/* <data dir>/models; newly allocated. */
char *moe_library_models_dir(void);

/* TRUE if `name` is a valid model name; otherwise FALSE with an
 * INVALID_NAME error that says why. */
gboolean moe_library_check_name(const char *name, GError **error);
/* Folder name for a valid model name ("org/repo" -> "org--repo"); NULL (and
 * an error) for an invalid one. */
char *moe_library_name_to_folder(const char *name, GError **error);
/* The model name for a folder name ("org--repo" -> "org/repo"), or NULL if
 * the folder name is not one the mapping produces. */
char *moe_library_folder_to_name(const char *folder);
/* Absolute path of the model's folder under models/; NULL for an invalid
 * name. */
char *moe_library_model_dir(const char *name, GError **error);

/* Checks a relative file path inside a model ("a.gguf", "Q4_K_M/a.gguf"):
 * '/'-separated parts of [A-Za-z0-9._+-] and a few more printable characters,
 * none empty, ".", "..", or starting with '.'; no backslash, no ':' (Windows
 * drive letters and streams), at most 8 levels and 512 bytes. */
gboolean moe_library_check_rel_path(const char *path, GError **error);

/* Human sizes: "1.23 GB" (powers of 1000, as disks and Hugging Face count). */
char *moe_library_format_size(guint64 bytes);

G_END_DECLS

#endif /* MOEDESK_LIBRARY_H */
