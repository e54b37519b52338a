/*
 * tray-win32.c — the tray icon on Windows: Shell_NotifyIcon with a popup
 * menu holding the same items as the Linux one (status, Open MoeDesk,
 * Quit MoeDesk); a left click opens MoeDesk.
 *
 * The icon's messages go to a hidden top-level window that is never shown.
 * Not a message-only window (HWND_MESSAGE): those miss the "TaskbarCreated"
 * broadcast, which is how an icon comes back after Explorer restarts.
 * GLib's main loop does not dispatch window messages by itself, so a
 * GIOChannel on the thread's message queue (g_io_channel_win32_new_messages)
 * wakes it and pump_messages() dispatches them.
 *
 * Untested: app/ is not cross-compiled yet; this file was only written
 * against the Win32 documentation (see app/DESIGN.md, "Tray").
 */
#include "tray-internal.h"

#include <string.h>
#include <windows.h>
#include <shellapi.h>

#define WM_TRAY_ICON (WM_APP + 1)
#define TRAY_ICON_UID 1
#define TRAY_CLASS L"MoeDeskServiceTray"

struct svc_tray_backend {
    svc_tray *tray;
    HWND hwnd;
    HICON icon;             /* ours; NULL: the stock application icon */
    UINT taskbar_created;   /* registered "TaskbarCreated" message */
    GIOChannel *messages;
    guint messages_watch;
};

/* UTF-8 into a fixed WCHAR buffer of `n` units, cut and NUL-terminated;
 * `amp` doubles '&' (a menu mnemonic marker) so it shows as itself. */
static void to_wide(WCHAR *dst, size_t n, const char *src, gboolean amp)
{
    gunichar2 *w = g_utf8_to_utf16(src ? src : "", -1, NULL, NULL, NULL);
    size_t k = 0;
    for (const gunichar2 *p = w; p && *p && k + 2 < n; p++) {
        if (amp && *p == '&')
            dst[k++] = L'&';
        dst[k++] = *p;
    }
    dst[k] = 0;
    g_free(w);
}

static void fill_nid(struct svc_tray_backend *be, NOTIFYICONDATAW *nid)
{
    memset(nid, 0, sizeof *nid);
    nid->cbSize = sizeof *nid;
    nid->hWnd = be->hwnd;
    nid->uID = TRAY_ICON_UID;
    nid->uFlags = NIF_MESSAGE | NIF_ICON | NIF_TIP;
    nid->uCallbackMessage = WM_TRAY_ICON;
    nid->hIcon = be->icon ? be->icon : LoadIconW(NULL, (LPCWSTR)IDI_APPLICATION);
    char *tip = g_strdup_printf("%s\n%s", SVC_TRAY_TITLE, be->tray->status);
    to_wide(nid->szTip, G_N_ELEMENTS(nid->szTip), tip, FALSE);
    g_free(tip);
}

static void show_menu(struct svc_tray_backend *be)
{
    HMENU menu = CreatePopupMenu();
    for (int id = SVC_TRAY_ITEM_ROOT + 1; id < SVC_TRAY_N_ITEMS; id++) {
        if (svc_tray_item_is_separator(id)) {
            AppendMenuW(menu, MF_SEPARATOR, 0, NULL);
            continue;
        }
        WCHAR label[256];
        to_wide(label, G_N_ELEMENTS(label), svc_tray_item_label(be->tray, id), TRUE);
        AppendMenuW(menu, MF_STRING | (svc_tray_item_is_enabled(id) ? 0 : MF_GRAYED),
                    (UINT_PTR)id, label);
    }
    POINT pt;
    GetCursorPos(&pt);
    /* Without the foreground, the menu does not close when the user clicks
     * elsewhere; the WM_NULL afterwards is the documented companion. */
    SetForegroundWindow(be->hwnd);
    int cmd = TrackPopupMenu(menu, TPM_RETURNCMD | TPM_NONOTIFY | TPM_RIGHTBUTTON,
                             pt.x, pt.y, 0, be->hwnd, NULL);
    PostMessageW(be->hwnd, WM_NULL, 0, 0);
    DestroyMenu(menu);
    if (cmd > 0 && svc_tray_item_is_enabled(cmd))
        svc_tray_activate(be->tray, cmd);
}

static LRESULT CALLBACK tray_wndproc(HWND hwnd, UINT msg, WPARAM wp, LPARAM lp)
{
    struct svc_tray_backend *be = (void *)GetWindowLongPtrW(hwnd, GWLP_USERDATA);
    if (be && msg == WM_TRAY_ICON) {
        /* No NIM_SETVERSION: lParam is the mouse message itself. */
        if (lp == WM_RBUTTONUP || lp == WM_CONTEXTMENU)
            show_menu(be);
        else if (lp == WM_LBUTTONUP)
            svc_tray_activate(be->tray, SVC_TRAY_ITEM_OPEN);
        return 0;
    }
    if (be && msg == be->taskbar_created) {
        NOTIFYICONDATAW nid;
        fill_nid(be, &nid);
        Shell_NotifyIconW(NIM_ADD, &nid);
        return 0;
    }
    return DefWindowProcW(hwnd, msg, wp, lp);
}

static gboolean pump_messages(GIOChannel *ch, GIOCondition cond, gpointer data)
{
    MSG msg;
    (void)ch, (void)cond, (void)data;
    while (PeekMessageW(&msg, NULL, 0, 0, PM_REMOVE)) {
        TranslateMessage(&msg);
        DispatchMessageW(&msg);
    }
    return G_SOURCE_CONTINUE;
}

/* 32-bit colour (BGRA in memory, i.e. our 0xAARRGGBB little-endian) with an
 * all-zero AND mask: Windows draws it with its alpha channel. */
static HICON make_icon(void)
{
    int n = GetSystemMetrics(SM_CXSMICON);
    if (n <= 0 || n > 256)
        n = 16;
    guint32 *px = g_new(guint32, n * n);
    svc_tray_draw_icon(px, n);
    int mask_stride = (n + 15) / 16 * 2;
    guint8 *mask = g_new0(guint8, mask_stride * n);
    HICON icon = CreateIcon(GetModuleHandleW(NULL), n, n, 1, 32, mask, (const BYTE *)px);
    g_free(mask);
    g_free(px);
    return icon;
}

struct svc_tray_backend *svc_tray_backend_start(svc_tray *tray)
{
    static gboolean class_done;
    HINSTANCE inst = GetModuleHandleW(NULL);
    if (!class_done) {
        WNDCLASSW wc = {0};
        wc.lpfnWndProc = tray_wndproc;
        wc.hInstance = inst;
        wc.lpszClassName = TRAY_CLASS;
        class_done = RegisterClassW(&wc) != 0;
    }
    struct svc_tray_backend *be = g_new0(struct svc_tray_backend, 1);
    be->tray = tray;
    be->hwnd = CreateWindowExW(0, TRAY_CLASS, L"MoeDesk", WS_OVERLAPPED, 0, 0, 0, 0,
                               NULL, NULL, inst, NULL);
    if (!be->hwnd) {
        g_message("tray: cannot create the tray window (error %lu); no tray icon",
                  (unsigned long)GetLastError());
        g_free(be);
        return NULL;
    }
    SetWindowLongPtrW(be->hwnd, GWLP_USERDATA, (LONG_PTR)be);
    be->taskbar_created = RegisterWindowMessageW(L"TaskbarCreated");
    be->icon = make_icon();
    be->messages = g_io_channel_win32_new_messages((gsize)be->hwnd);
    be->messages_watch = g_io_add_watch(be->messages, G_IO_IN, pump_messages, be);
    NOTIFYICONDATAW nid;
    fill_nid(be, &nid);
    if (!Shell_NotifyIconW(NIM_ADD, &nid))
        g_message("tray: the taskbar did not take the icon (yet); it is added when "
                  "Explorer announces itself");
    return be;
}

void svc_tray_backend_update(svc_tray *tray)
{
    NOTIFYICONDATAW nid;
    fill_nid(tray->backend, &nid);
    Shell_NotifyIconW(NIM_MODIFY, &nid);
}

void svc_tray_backend_stop(svc_tray *tray)
{
    struct svc_tray_backend *be = tray->backend;
    tray->backend = NULL;
    NOTIFYICONDATAW nid;
    fill_nid(be, &nid);
    Shell_NotifyIconW(NIM_DELETE, &nid);
    g_source_remove(be->messages_watch);
    g_io_channel_unref(be->messages);
    SetWindowLongPtrW(be->hwnd, GWLP_USERDATA, 0);
    DestroyWindow(be->hwnd);
    if (be->icon)
        DestroyIcon(be->icon);
    g_free(be);
}

const char *svc_tray_backend_bus_name(const svc_tray *tray)
{
    (void)tray;
    return NULL;
}
