/*
 * download-job.h — one file's transfer, the state machine behind
 * download-manager.h (which owns jobs, queues them, and fans their progress
 * and result out to every caller that asked for the same file). Internal to
 * app/library.
 */
#ifndef MOEDESK_DOWNLOAD_JOB_H
#define MOEDESK_DOWNLOAD_JOB_H

#include "download-manager.h"

G_BEGIN_DECLS

typedef struct DlJob DlJob;

typedef void (*DlJobProgressFunc)(DlJob *job, const MoeDownloadProgress *p, gpointer data);
/* Called once on the main context; `error` is NULL on success and is
 * borrowed (the job frees it with itself). */
typedef void (*DlJobDoneFunc)(DlJob *job, const GError *error, gpointer data);

DlJob      *dl_job_new(SoupSession *session, const MoeDownloadSpec *spec, MoeDownloadFlags flags,
                       DlJobProgressFunc progress, DlJobDoneFunc done, gpointer data);
/* Frees a job that is not started or has called its DlJobDoneFunc. */
void        dl_job_free(DlJob *job);
void        dl_job_start(DlJob *job);
/* Stops the job; it reports G_IO_ERROR_CANCELLED soon after (keeping the
 * part for a later resume). */
void        dl_job_cancel(DlJob *job);
const char *dl_job_dest(const DlJob *job);
/* The last progress record (for callers that join a running job). */
const MoeDownloadProgress *dl_job_progress(const DlJob *job);

G_END_DECLS

#endif /* MOEDESK_DOWNLOAD_JOB_H */
