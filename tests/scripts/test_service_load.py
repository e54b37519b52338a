"""test_service_load.py — a bounded load run against a real moedesk-service
on loopback (issue #5, "Load"): N requests over C concurrent keep-alive
connections, mixing /v1/chat/completions (whole and streamed) and
/v1/completions (whole and streamed), with a queue small enough that some
requests are refused. Checks:

  - no 5xx and nothing but 200 or 429; every 429 has Retry-After and an
    OpenAI error object (code queue_full), also for streamed requests;
  - every 200 is a complete answer (strict JSON; streams end with [DONE]);
  - a client told to wait (429) waits Retry-After before its next request;
  - after a clean stop (SIGTERM, exit 0) there is exactly one usage row per
    request: as many 200 rows and 429 rows as the clients saw, and the
    completion tokens in the rows add up to what the clients were told.

Numbers (2 shared cores, demo model): N=2000, C=64, 4 sequence slots, a
queue of 16, max_tokens 1-8, one prompt in four shared: 4-9 s (25 s on
the ASan build), 210-500 requests/s depending on what else runs, 10-20 %
refused. Prints requests/s and latency percentiles.

usage: test_service_load.py MOEDESK_SERVICE DEMO_MODEL.gguf [MOEDESK_CLI]
"""
import http.client
import json
import sys
import threading
import time

from svc_harness import Checker, Service, sse_events

exe, model = sys.argv[1], sys.argv[2]
t = Checker()
NAME = "moedesk-demo-random"
N_REQUESTS = 2000
N_CONNECTIONS = 64
PARALLEL, QUEUE = 4, 16

KINDS = [("/v1/chat/completions", False), ("/v1/chat/completions", True),
         ("/v1/completions", False), ("/v1/completions", True)]


def request_body(i):
    path, stream = KINDS[i % len(KINDS)]
    # One request in four repeats a prompt (prefix reuse under load); the
    # rest are distinct.
    text = "Load test prompt %d, with some words" % (i if i % 4 else 0)
    body = {"model": NAME, "max_tokens": 1 + i % 8, "temperature": 0 if i % 2 else 0.7,
            "seed": i}
    if path.endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return path, stream, body


lock = threading.Lock()
next_index = [0]
results = {}      # index -> (status, completion_tokens or None, seconds)
problems = []     # descriptions of answers that were wrong


def problem(what):
    with lock:
        problems.append(what)


def check_answer(i, path, stream, status, headers, data):
    """Returns the completion tokens a 200 reported; records problems."""
    if status == 429:
        ra = headers.get("retry-after", "")
        if not ra.isdigit() or int(ra) < 1:
            problem("request %d: 429 without a Retry-After in seconds (%r)" % (i, ra))
        try:
            err = json.loads(data)["error"]
            if not (set(err) >= {"message", "type", "param", "code"}
                    and err["code"] == "queue_full"):
                problem("request %d: 429 error object %r" % (i, err))
        except (ValueError, KeyError, TypeError):
            problem("request %d: 429 body is not an OpenAI error: %r" % (i, data[:200]))
        return None
    if status != 200:
        problem("request %d (%s%s): status %d: %r"
                % (i, path, " stream" if stream else "", status, data[:200]))
        return None
    try:
        if stream:
            if not headers.get("content-type", "").startswith("text/event-stream"):
                problem("request %d: stream content type %r" % (i, headers.get("content-type")))
            ev = sse_events(data)
            if not ev or ev[-1][1] != "[DONE]":
                problem("request %d: stream does not end with [DONE]" % i)
                return None
            chunks = [json.loads(d) for _, d in ev[:-1]]
            if any("error" in c for c in chunks):
                problem("request %d: error event in a 200 stream" % i)
            usage = [c["usage"] for c in chunks if c.get("usage")]
            if len(usage) != 1:
                problem("request %d: %d usage chunks" % (i, len(usage)))
                return None
            return usage[0]["completion_tokens"]
        doc = json.loads(data)
        want = "chat.completion" if path.endswith("chat/completions") else "text_completion"
        if doc.get("object") != want:
            problem("request %d: object %r" % (i, doc.get("object")))
        return doc["usage"]["completion_tokens"]
    except (ValueError, KeyError, TypeError, IndexError) as e:
        problem("request %d: bad 200 answer (%s): %r" % (i, e, data[:200]))
        return None


def worker(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while True:
        with lock:
            i = next_index[0]
            if i >= N_REQUESTS:
                break
            next_index[0] += 1
        path, stream, body = request_body(i)
        payload = json.dumps(body).encode()
        t0 = time.monotonic()
        try:
            conn.request("POST", path, body=payload,
                         headers={"Host": "127.0.0.1:%d" % port,
                                  "Content-Type": "application/json",
                                  "User-Agent": "moedesk-load-test"})
            r = conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException) as e:
            # No retry: a retried request could be metered twice.
            problem("request %d: transport error %r" % (i, e))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                results[i] = (-1, None, time.monotonic() - t0)
            continue
        dt = time.monotonic() - t0
        headers = {k.lower(): v for k, v in r.getheaders()}
        tokens = check_answer(i, path, stream, r.status, headers, data)
        with lock:
            results[i] = (r.status, tokens, dt)
        if r.will_close:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        if r.status == 429:
            # As clients do: wait as told before the next request (the
            # refused one is not retried, so it has exactly one row).
            time.sleep(float(headers.get("retry-after", "1")))
    conn.close()


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else 0.0


with Service(exe, model=model, args=["--parallel", str(PARALLEL), "--queue", str(QUEUE),
                                     "--ctx", "256"]) as svc:
    t_start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(svc.port,)) for _ in range(N_CONNECTIONS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - t_start
    h = svc.json("GET", "/health")
    t.eq((h.get("slots_processing"), h.get("queued")), (0, 0), "idle after the load")

t.eq(svc.proc.returncode, 0, "clean exit on SIGTERM after the load")
for p in problems[:20]:
    print("  ", p)
t.eq(len(problems), 0, "answers with problems")
t.eq(len(results), N_REQUESTS, "every request answered")

statuses = {}
for st, _, _ in results.values():
    statuses[st] = statuses.get(st, 0) + 1
n_ok, n_busy = statuses.get(200, 0), statuses.get(429, 0)
t.check(not any(st >= 500 for st in statuses), "no 5xx (%r)" % statuses)
t.eq(n_ok + n_busy, N_REQUESTS, "only 200 and 429 (%r)" % statuses)
t.check(n_ok > N_REQUESTS // 2, "most requests served (%d of %d)" % (n_ok, N_REQUESTS))
tokens_seen = sum(tok for st, tok, _ in results.values() if st == 200 and tok is not None)
lat = [dt for st, _, dt in results.values() if st == 200]
print("load: %d requests over %d connections in %.1f s: %.0f requests/s; %d ok, %d refused "
      "(429); %d completion tokens (%.0f tokens/s); latency of ok requests p50 %.0f ms, "
      "p95 %.0f ms, max %.0f ms"
      % (N_REQUESTS, N_CONNECTIONS, elapsed, N_REQUESTS / elapsed, n_ok, n_busy, tokens_seen,
         tokens_seen / elapsed, percentile(lat, 50) * 1000, percentile(lat, 95) * 1000,
         max(lat or [0]) * 1000), flush=True)

# Exactly one usage row per request, whatever its status.
rows = svc.usage_rows()
by_status = {}
for r in rows:
    by_status[r["http_status"]] = by_status.get(r["http_status"], 0) + 1
t.eq(len(rows), N_REQUESTS, "one usage row per request")
t.eq(by_status.get(200, 0), n_ok, "usage rows with status 200")
t.eq(by_status.get(429, 0), n_busy, "usage rows with status 429")
t.eq(sum(r["completion_tokens"] for r in rows if r["http_status"] == 200), tokens_seen,
     "completion tokens in the rows = what the clients were told")
t.check(all(r["error_kind"] == "queue_full" for r in rows if r["http_status"] == 429),
        "refused rows say queue_full")
t.check(all(r["client"] == "moedesk-load-test" and r["route"] == "local" for r in rows),
        "client and route recorded")
want_endpoints = {}
for i in range(N_REQUESTS):
    path = KINDS[i % len(KINDS)][0]
    want_endpoints[path] = want_endpoints.get(path, 0) + 1
got_endpoints = {}
for r in rows:
    got_endpoints[r["endpoint"]] = got_endpoints.get(r["endpoint"], 0) + 1
t.eq(got_endpoints, want_endpoints, "rows per endpoint")
t.done()
