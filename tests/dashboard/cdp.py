"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (Python 3 stdlib).

Chromium reads commands from fd 3 and writes answers and events to fd 4, each message a JSON
object followed by a NUL byte. One page target is attached in flat mode; everything the page
reports as an error (uncaught exceptions, console.error, Log entries of level error) is kept in
`errors` for the test to check.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time


class CdpError(RuntimeError):
    pass


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise CdpError("no chromium on PATH (Debian: apt-get install chromium; scripts/setup.sh does)")


class Browser:
    def __init__(self, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="falcon-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            # Chromium expects its pipe at fds 3 (commands in) and 4 (messages out).
            os.dup2(to_chrome_r, 100)
            os.dup2(from_chrome_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        args = [
            find_chromium(), "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
            f"--user-data-dir={self.profile}", "--no-first-run", "--no-default-browser-check",
            "--disable-gpu", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--metrics-recording-only",
            "--password-store=basic", "--use-mock-keychain", "--mute-audio",
            f"--window-size={width},{height}", "about:blank",
        ]
        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, pass_fds=(3, 4), preexec_fn=child_fds)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._lock = threading.Lock()
        self._answers = {}
        self._cond = threading.Condition()
        self.events = []
        self.errors = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session = None

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self._on_event(msg)
                    self._cond.notify_all()

    def _on_event(self, msg):
        method = msg.get("method", "")
        params = msg.get("params", {})
        self.events.append(msg)
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.errors.append(("exception", text, time.monotonic()))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.errors.append(("console", text, time.monotonic()))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            self.errors.append((f"log:{e.get('source')}", f"{e.get('text')} {e.get('url', '')}",
                                time.monotonic()))

    def send(self, method, params=None, session=True, timeout=30):
        with self._lock:
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self._to_chrome, data)
            data = data[n:]
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._answers:
                if self._closed:
                    raise CdpError(f"chromium exited during {method}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError(f"{method}: no answer in {timeout} s")
                self._cond.wait(left)
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send("Target.attachToTarget",
                             {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        # A visible, focused page: animation frames and timers run as for a user looking at it.
        self.send("Page.bringToFront")
        self.send("Emulation.setFocusEmulationEnabled", {"enabled": True})

    def viewport(self, width, height):
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def navigate(self, url):
        self.send("Page.navigate", {"url": url})

    def eval(self, expression, timeout=30):
        r = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                           "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CdpError(f"evaluate failed: {d.get('exception', {}).get('description') or d.get('text')}\n"
                           f"  in: {expression[:200]}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression, timeout=15, what=None):
        """Evaluates `expression` until it is truthy; raises naming `what` after `timeout`."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.eval(expression)
            except CdpError as e:
                last = str(e)
            else:
                if last:
                    return last
            # An evaluate round trip paces this loop; this only keeps it from spinning.
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what or expression} (last: {last!r})")

    def screenshot(self, path, max_height=6000):
        """The whole page (up to max_height CSS pixels) as PNG."""
        metrics = self.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height), "scale": 1}})
        import base64
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
