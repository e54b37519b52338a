"""test_service_tray.py — moedesk-service's tray icon (app/service/tray*.c)
on a private D-Bus session bus, read and driven with `gdbus` as a panel
would: the StatusNotifierItem's name and properties, registration with a
StatusNotifierWatcher (tests/tools/sni-watcher.c, started after the
service and restarted, as a panel that comes late or restarts), the
dbusmenu layout, status updates when the model is unloaded and loaded,
"Open MoeDesk", and "Quit MoeDesk", which must stop the service like
SIGTERM: exit 0 with the usage database flushed. Then: without any session
bus, and with --no-tray, the service runs normally.

usage: test_service_tray.py MOEDESK_SERVICE DEMO_MODEL.gguf MOEDESK_CLI SNI_WATCHER
"""
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from svc_harness import Checker, Service

exe, model, _cli, watcher_exe = sys.argv[1:5]
model_name = os.path.splitext(os.path.basename(model))[0]
t = Checker()
DBUS_DAEMON = shutil.which("dbus-daemon") or "/usr/bin/dbus-daemon"
GDBUS = shutil.which("gdbus") or "/usr/bin/gdbus"
for tool in (DBUS_DAEMON, GDBUS):
    if not os.access(tool, os.X_OK):
        print("FAIL: %s is needed for this test (Debian: dbus-daemon, libglib2.0-bin)" % tool)
        raise SystemExit(1)


def wait_for(pred, timeout=15, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


class Lines:
    """A process's stdout lines, readable with a timeout."""

    def __init__(self, proc):
        self.q = queue.Queue()
        self.seen = []
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, f):
        for line in f:
            self.q.put(line.rstrip("\n"))

    def expect(self, pattern, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self.q.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            self.seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m
        return None


class Bus:
    """A private session bus (dbus-daemon --session) for this test only."""

    def __enter__(self):
        self.proc = subprocess.Popen([DBUS_DAEMON, "--session", "--print-address", "--nofork"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            raise RuntimeError("dbus-daemon printed no address")
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def env(self):
        e = dict(os.environ)
        e["DBUS_SESSION_BUS_ADDRESS"] = self.address
        return e

    def gdbus(self, *args):
        """gdbus call --session ARGS; returns (ok, stdout, stderr)."""
        p = subprocess.run([GDBUS, "call", "--session"] + list(args), env=self.env(),
                           capture_output=True, text=True, timeout=30)
        return p.returncode == 0, p.stdout, p.stderr

    def call(self, dest, path, method, *args):
        ok, out, err = self.gdbus("--dest", dest, "--object-path", path, "--method", method,
                                  *args)
        if not ok:
            raise AssertionError("%s %s %s: %s" % (dest, path, method, err.strip()))
        return out

    def names(self):
        out = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.ListNames")
        return re.findall(r"'([^']*)'", out)

    def watcher(self):
        p = subprocess.Popen([watcher_exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=self.env(), text=True)
        return p, Lines(p)


def item_prop(bus, name, prop):
    return bus.call(name, "/StatusNotifierItem", "org.freedesktop.DBus.Properties.Get",
                    "org.kde.StatusNotifierItem", prop)


def layout(bus, name):
    """(revision, {id: (props text, label or None)}) from GetLayout(0, -1, [])."""
    out = bus.call(name, "/MenuBar", "com.canonical.dbusmenu.GetLayout", "0", "--", "-1", "[]")
    rev = int(re.match(r"\(uint32 (\d+),", out).group(1))
    items = {}
    for m in re.finditer(r"\((\d+), \{([^}]*)\}", out):
        label = re.search(r"'label': <'([^']*)'>", m.group(2))
        items[int(m.group(1))] = (m.group(2), label.group(1) if label else None)
    return rev, items


def item_id(items, label):
    for i, (_, lab) in items.items():
        if lab == label:
            return i
    return None


def chat(svc):
    # Only the status: the demo model's random text is not what is tested.
    st, _, body = svc.request("POST", "/v1/chat/completions", {
        "model": model_name, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hello"}]})
    t.eq(st, 200, "chat completion (%r)" % body[:200])


home = tempfile.mkdtemp(prefix="moedesk-tray-")
bindir = os.path.join(home, "bin")
os.makedirs(bindir)
marker = os.path.join(home, "opened")
# A stand-in for the window, so "Open MoeDesk" has something to start.
with open(os.path.join(bindir, "moedesk"), "w") as f:
    f.write('#!/bin/sh\necho opened >> "$TRAY_TEST_MARKER"\n')
os.chmod(os.path.join(bindir, "moedesk"), 0o755)

with Bus() as bus:
    env = {"DBUS_SESSION_BUS_ADDRESS": bus.address, "TRAY_TEST_MARKER": marker,
           "PATH": bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")}
    svc = Service(exe, model=model, args=["--idle-unload", "2"], env=env, tray=True)
    svc.start()
    name = "org.kde.StatusNotifierItem-%d-1" % svc.proc.pid
    url = "http://127.0.0.1:%d" % svc.port

    # -- the item is on the bus with no watcher around; nothing fails
    t.check(wait_for(lambda: name in bus.names()), "%s on the bus" % name)
    monitor = subprocess.Popen([GDBUS, "monitor", "--session", "--dest", name],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=bus.env(), text=True)
    signals = Lines(monitor)
    for prop, want in [("Id", "'moedesk'"), ("Title", "'MoeDesk'"), ("Status", "'Active'"),
                       ("Category", "'ApplicationStatus'"), ("ItemIsMenu", "false"),
                       ("Menu", "objectpath '/MenuBar'")]:
        out = item_prop(bus, name, prop)
        t.eq(out.strip(), "(<%s>,)" % want, "property %s" % prop)
    pix = item_prop(bus, name, "IconPixmap")
    sizes = [(int(w), int(h), len(b.split(","))) for w, h, b in
             re.findall(r"\((\d+), (\d+), \[(?:byte )?([^\]]*)\]\)", pix)]
    t.eq(sizes, [(22, 22, 22 * 22 * 4), (44, 44, 44 * 44 * 4)], "IconPixmap: 22 and 44 px ARGB32")
    t.check("0xff, 0xff, 0xff, 0xff" in pix, "the icon has opaque white pixels (the M)")
    tip = item_prop(bus, name, "ToolTip")
    t.check("'MoeDesk'" in tip and model_name in tip and url in tip,
            "ToolTip names the model and URL: %s" % tip[-120:].strip())
    ok, _, err = bus.gdbus("--dest", name, "--object-path", "/MenuBar", "--method",
                           "org.freedesktop.DBus.Properties.Get", "com.canonical.dbusmenu", "Version")
    t.check(ok, "dbusmenu Version readable (%s)" % err.strip())
    t.eq(bus.call(name, "/MenuBar", "org.freedesktop.DBus.Properties.Get",
                  "com.canonical.dbusmenu", "Version").strip(), "(<uint32 3>,)", "dbusmenu Version")

    # -- a watcher that appears later gets the item registered; so does a restarted one
    for round_ in ("late watcher", "restarted watcher"):
        wproc, wlines = bus.watcher()
        t.check(wlines.expect(r"^ready$") is not None, "%s owns its name" % round_)
        m = wlines.expect(r"^registered (\S+) (\S+)$")
        t.check(m is not None and m.group(1) == name,
                "%s: RegisterStatusNotifierItem(%s) (saw %r)" % (round_, name, wlines.seen))
        t.check(wlines.expect(r"^item-id moedesk$") is not None,
                "%s reads the item's Id back" % round_)
        wproc.stdin.close()
        wproc.wait(timeout=10)
        t.check(wait_for(lambda: "org.kde.StatusNotifierWatcher" not in bus.names()),
                "%s gone" % round_)

    # -- the menu
    rev, items = layout(bus, name)
    t.check(0 in items, "GetLayout has the root")
    status_id = next((i for i, (_, lab) in items.items() if lab and url in lab), None)
    t.check(status_id is not None and model_name in items[status_id][1],
            "status item 'MODEL · URL' (items %r)" % items)
    if status_id is not None:
        t.check("'enabled': <false>" in items[status_id][0], "status item is disabled")
    open_id, quit_id = item_id(items, "Open MoeDesk"), item_id(items, "Quit MoeDesk")
    t.check(open_id is not None and quit_id is not None, "Open and Quit items (%r)" % items)
    t.check(sum(1 for p, _ in items.values() if "'separator'" in p) >= 1, "a separator")
    ok, _, err = bus.gdbus("--dest", name, "--object-path", "/MenuBar", "--method",
                           "com.canonical.dbusmenu.GetLayout", "99", "--", "-1", "[]")
    t.check(not ok and "99" in err, "GetLayout of an unknown id is an error naming it")
    out = bus.call(name, "/MenuBar", "com.canonical.dbusmenu.AboutToShowGroup", "[0, 42]")
    t.eq(out.strip(), "(@ai [], [42])", "AboutToShowGroup reports unknown ids")
    out = bus.call(name, "/MenuBar", "com.canonical.dbusmenu.GetGroupProperties",
                   "[%d]" % quit_id, "['label']")
    t.eq(out.strip(), "([(%d, {'label': <'Quit MoeDesk'>})],)" % quit_id, "GetGroupProperties")

    # -- "Open MoeDesk" (menu click and left click on the icon) starts the window
    bus.call(name, "/MenuBar", "com.canonical.dbusmenu.Event", str(open_id), "'clicked'",
             "<0>", "0")
    t.check(wait_for(lambda: os.path.exists(marker)), "Open MoeDesk started `moedesk`")
    bus.call(name, "/StatusNotifierItem", "org.kde.StatusNotifierItem.Activate", "0", "0")
    t.check(wait_for(lambda: open(marker).read().count("opened") == 2),
            "Activate (left click) started `moedesk` again")
    # the disabled status item does nothing when clicked; hovering the quit item neither
    bus.call(name, "/MenuBar", "com.canonical.dbusmenu.EventGroup",
             "[(%d, 'clicked', <0>, uint32 0), (%d, 'hovered', <0>, uint32 0)]"
             % (status_id or 1, quit_id))
    time.sleep(0.5)
    t.check(svc.proc.poll() is None, "hovering Quit does not quit")

    # -- status follows the model: idle unload (2 s), then a request loads it again
    t.check(wait_for(lambda: "no model loaded" in item_prop(bus, name, "ToolTip"), 20),
            "ToolTip says 'no model loaded' after the idle unload")
    rev2, items2 = layout(bus, name)
    t.check(rev2 > rev, "layout revision went up (%d -> %d)" % (rev, rev2))
    t.check(status_id in items2 and "no model loaded" in (items2[status_id][1] or ""),
            "status item says no model loaded")
    for sig in ("NewToolTip", "ItemsPropertiesUpdated", "LayoutUpdated"):
        t.check(signals.expect(r"\." + sig + r" ", timeout=5) is not None,
                "signal %s sent (saw %r)" % (sig, signals.seen[-5:]))
    monitor.terminate()
    monitor.wait(timeout=10)
    chat(svc)  # loads the model again, and leaves a usage row
    t.check(wait_for(lambda: model_name in item_prop(bus, name, "ToolTip"), 10),
            "ToolTip names the model again after it was loaded")
    n_rows_before = len(svc.usage_rows())
    chat(svc)

    # -- "Quit MoeDesk": a clean stop, as on SIGTERM
    bus.call(name, "/MenuBar", "com.canonical.dbusmenu.Event", str(quit_id), "'clicked'",
             "<0>", "0")
    try:
        rc = svc.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rc = "still running"
        svc.stop()
    t.eq(rc, 0, "exit status after Quit MoeDesk")
    t.check(any("quit requested" in line for line in svc.stderr_lines), "quit logged")
    rows = svc.usage_rows()
    t.check(len(rows) >= n_rows_before + 1 and len(rows) >= 2,
            "both chat requests are in the usage database (%d rows)" % len(rows))
    t.check(all(r["http_status"] == 200 and r["endpoint"] == "/v1/chat/completions"
                for r in rows), "usage rows: chat completions, status 200 (%r)" % rows)
    t.check(wait_for(lambda: name not in bus.names()), "the item left the bus")

    # -- --no-tray: nothing on the bus, nothing registered, no tray log line
    wproc, wlines = bus.watcher()
    t.check(wlines.expect(r"^ready$") is not None, "watcher for --no-tray")
    with Service(exe, model=model, args=["--no-tray"], env=env, tray=True) as quiet:
        st, _, _ = quiet.request("GET", "/health")
        t.eq(st, 200, "--no-tray serves")
        time.sleep(1.0)
        t.check(not any(n.startswith("org.kde.StatusNotifierItem") for n in bus.names()),
                "--no-tray: no item on the bus")
    t.check(wlines.expect(r"^registered", timeout=0.5) is None, "--no-tray: nothing registered")
    t.check(not any("tray" in line for line in quiet.stderr_lines), "--no-tray: no tray log line")
    # ... and a service started while the watcher is up registers at once
    with Service(exe, model=model, env=env, tray=True) as early:
        m = wlines.expect(r"^registered (\S+) ")
        t.check(m is not None and m.group(1) == "org.kde.StatusNotifierItem-%d-1" % early.proc.pid,
                "watcher present at start: item registered (saw %r)" % wlines.seen)
    wproc.stdin.close()
    wproc.wait(timeout=10)

# -- no session bus at all: the service runs; one log line says there is no tray
runtime = tempfile.mkdtemp(prefix="moedesk-tray-run-")
for label, bus_env in [("bus address pointing nowhere",
                        {"DBUS_SESSION_BUS_ADDRESS": "unix:path=" + os.path.join(runtime, "none")}),
                       ("no bus address", None)]:
    class NoBus(Service):
        def env(self):
            e = Service.env(self)
            # No bus, no X11/Wayland to autolaunch one, no $XDG_RUNTIME_DIR/bus.
            for k in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
                e.pop(k, None)
            e["XDG_RUNTIME_DIR"] = runtime
            e.update(bus_env or {})
            return e
    with NoBus(exe, model=model, tray=True) as nb:
        st, _, _ = nb.request("GET", "/health")
        t.eq(st, 200, "%s: serves" % label)
        chat(nb)
        t.check(wait_for(lambda: any("tray" in line for line in nb.stderr_lines), 5),
                "%s: a log line about the tray" % label)
    tray_lines = [line for line in nb.stderr_lines if "tray" in line]
    t.eq(len(tray_lines), 1, "%s: exactly one tray line (%r)" % (label, tray_lines))
    t.check(all("no session bus" in line and "CRITICAL" not in line and "WARNING" not in line
                for line in tray_lines), "%s: the line says there is no session bus" % label)
    t.eq(nb.proc.returncode, 0, "%s: clean exit on SIGTERM" % label)
    t.eq(len(nb.usage_rows()), 1, "%s: usage row flushed" % label)

shutil.rmtree(home, ignore_errors=True)
shutil.rmtree(runtime, ignore_errors=True)
t.done()
