"""Open every page of the built docs site in headless Chromium, offline, and report what a reader would hit.

`python tools/docs/check_site.py docs [--shots DIR]` serves the site on 127.0.0.1, drives Debian's `chromium` through
its DevTools protocol (the `websocket-client` package) with every network feature off, and checks, page by page:
console errors and uncaught exceptions, math typeset by MathJax (and no TeX error), images loaded, links between pages
(and their #anchors) resolving, no request leaving the site, and that search answers. `--shots` saves screenshots.
The test `tests/test_docs.py` runs it; it exits 1 when a check fails.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                  '--disable-background-networking', '--disable-component-update', '--disable-sync',
                  '--disable-default-apps', '--disable-extensions', '--no-default-browser-check', '--mute-audio',
                  '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1',   # nothing but this machine
                  '--window-size=1280,900', '--hide-scrollbars']


def find_chromium() -> str | None:
    "Path of Debian's `chromium` (or another Chromium/Chrome on PATH), None when there is none"
    for name in ('chromium', 'chromium-browser', 'google-chrome', 'chrome'):
        p = shutil.which(name)
        if p: return p
    return '/usr/bin/chromium' if os.access('/usr/bin/chromium', os.X_OK) else None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass


@contextlib.contextmanager
def serve(site: Path):
    "Serve `site` on a free port of 127.0.0.1; yields the base URL"
    handler = functools.partial(_Quiet, directory=str(site))
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True); t.start()
    try: yield f'http://127.0.0.1:{srv.server_address[1]}/'
    finally: srv.shutdown(); srv.server_close()


class CDP:
    "A minimal DevTools-protocol client: one page target, commands by id, events buffered"
    def __init__(self, ws_url: str):
        import websocket
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True, enable_multithread=True)
        self.i, self.events = 0, []

    def send(self, method: str, timeout: float = 30, **params):
        self.i += 1; mid = self.i
        self.ws.send(json.dumps({'id': mid, 'method': method, 'params': params}))
        end = time.time() + timeout
        while time.time() < end:
            msg = json.loads(self.ws.recv())
            if msg.get('id') == mid:
                if 'error' in msg: raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get('result', {})
            if 'method' in msg: self.events.append(msg)
        raise TimeoutError(method)

    def wait_event(self, method: str, timeout: float = 20):
        end = time.time() + timeout
        for e in self.events:
            if e['method'] == method: self.events.remove(e); return e
        self.ws.settimeout(1)
        try:
            while time.time() < end:
                try: msg = json.loads(self.ws.recv())
                except Exception as ex:
                    if type(ex).__name__ == 'WebSocketTimeoutException': continue
                    raise
                if 'method' in msg:
                    if msg['method'] == method: return msg
                    self.events.append(msg)
        finally: self.ws.settimeout(30)
        raise TimeoutError(f'no {method} within {timeout} s')

    def eval(self, js: str, timeout: float = 30):
        r = self.send('Runtime.evaluate', timeout=timeout, expression=js, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in r: raise RuntimeError(f"JS error: {r['exceptionDetails']}")
        return r['result'].get('value')

    def close(self):
        with contextlib.suppress(Exception): self.ws.close()


@contextlib.contextmanager
def chromium(binary: str):
    "Start headless Chromium with a fresh profile, network features off; yields a CDP client on its page"
    udd = tempfile.mkdtemp(prefix='conslaw_chromium_')
    proc = subprocess.Popen([binary, *CHROMIUM_FLAGS, f'--user-data-dir={udd}', '--remote-debugging-port=0',
                             'about:blank'], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cdp = None
    try:
        port_file, end = Path(udd)/'DevToolsActivePort', time.time() + 30
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if proc.poll() is not None: raise RuntimeError(f'chromium exited: {proc.stderr.read().decode()[-2000:]}')
            if time.time() > end: raise TimeoutError('chromium did not open its DevTools port in 30 s')
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        targets = json.load(urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list', timeout=10))
        page = next(t for t in targets if t.get('type') == 'page')
        cdp = CDP(page['webSocketDebuggerUrl'])
        for dom in ('Page', 'Runtime', 'Log', 'Network'): cdp.send(f'{dom}.enable')
        cdp.send('Emulation.setDeviceMetricsOverride', width=1280, height=900, deviceScaleFactor=1, mobile=False)
        yield cdp
    finally:
        if cdp: cdp.close()
        proc.terminate()
        try: proc.wait(10)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()
        shutil.rmtree(udd, ignore_errors=True)


_PAGE_JS = r"""(async () => {
  const t0 = Date.now();
  while (document.documentElement.getAttribute('data-math-typeset') !== 'done' && Date.now() - t0 < 40000)
    await new Promise(r => setTimeout(r, 50));
  const imgs = [...document.images];
  await Promise.all(imgs.map(i => i.complete ? 0 : new Promise(r => { i.onload = i.onerror = r; })));
  const math = [...document.querySelectorAll('.arithmatex')];
  return {
    title: document.title,
    h1: (document.querySelector('article h1') || {}).textContent || '',
    typeset_flag: document.documentElement.getAttribute('data-math-typeset'),
    math: math.length,
    math_typeset: math.filter(e => e.querySelector('mjx-container')).length,
    math_raw: math.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
    nav_raw_math: [...document.querySelectorAll('.md-nav__link')].filter(
        e => /\\\(|\\\[/.test(e.textContent) && !e.querySelector('mjx-container')).map(e => e.textContent.trim()),
    tex_errors: [...new Set([...document.querySelectorAll('mjx-merror, [data-mjx-error]')].map(
        e => e.getAttribute('data-mjx-error') || e.textContent.slice(0, 80)))],
    images: imgs.map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    nav: [...document.querySelectorAll('nav.md-nav--primary a.md-nav__link[href]')].map(a => a.href),
    resources: performance.getEntriesByType('resource').map(r => r.name),
  };
})()"""


def _same_site(url: str, base: str) -> bool: return url.startswith(base)
def _local(url: str) -> bool: return url.startswith(('data:', 'blob:', 'about:', 'chrome-error:'))


def check_site(site: Path, pages: list[str] | None = None, shots: Path | None = None, binary: str | None = None,
               search_query: str | None = 'law') -> dict:
    "Open every page of the built site in Chromium; return per-page findings and a list of `problems` (empty: all good)"
    site = Path(site)
    binary = binary or find_chromium()
    if not binary: raise FileNotFoundError('chromium is not installed (Debian: apt-get install chromium)')
    if pages is None: pages = sorted(p.name for p in site.glob('*.html') if p.name != '404.html')
    problems = []
    report = {'pages': {}, 'problems': problems, 'search_results': None}
    with serve(site) as base, chromium(binary) as cdp:
        for name in pages:
            url = base + name
            cdp.events.clear()
            cdp.send('Page.navigate', url=url)
            cdp.wait_event('Page.loadEventFired', timeout=30)
            info = cdp.eval(_PAGE_JS, timeout=90)
            # console errors, uncaught exceptions, failed loads, requests leaving the site
            with contextlib.suppress(TimeoutError): cdp.send('Runtime.evaluate', expression='1')   # flush events
            errs, off = [], []
            for e in cdp.events:
                m, p = e['method'], e.get('params', {})
                if m == 'Runtime.consoleAPICalled' and p.get('type') in ('error', 'assert'):
                    errs.append('console: ' + ' '.join(str(a.get('value', a.get('description', ''))) for a in p.get('args', [])))
                elif m == 'Runtime.exceptionThrown':
                    d = p.get('exceptionDetails', {})
                    errs.append('exception: ' + str(d.get('exception', {}).get('description') or d.get('text')))
                elif m == 'Log.entryAdded' and p.get('entry', {}).get('level') == 'error':
                    errs.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
                elif m == 'Network.requestWillBeSent':
                    u = p.get('request', {}).get('url', '')
                    if not (_same_site(u, base) or _local(u)): off.append(u)
                elif m == 'Network.loadingFailed' and not p.get('canceled'):   # not a load cut by navigation
                    errs.append(f"failed load: {p.get('errorText')}")
            off += [u for u in info['resources'] if not (_same_site(u, base) or _local(u))]
            info.update(errors=errs, offsite=sorted(set(off)))
            report['pages'][name] = info
            for msg in errs: problems.append(f'{name}: {msg}')
            for u in info['offsite']: problems.append(f'{name}: request leaves the site: {u}')
            if info['typeset_flag'] != 'done': problems.append(f'{name}: MathJax did not finish typesetting')
            if info['math_raw']: problems.append(f"{name}: math not typeset: {info['math_raw'][:3]}")
            for t in info['nav_raw_math']: problems.append(f'{name}: untypeset math in the navigation: {t}')
            for t in info['tex_errors']: problems.append(f'{name}: TeX error: {t}')
            for im in info['images']:
                if not im['ok']: problems.append(f"{name}: image did not load: {im['src']}")
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                png = cdp.send('Page.captureScreenshot', format='png')['data']
                (Path(shots)/f"{name.rsplit('.', 1)[0]}.png").write_bytes(base64.b64decode(png))
        # links between pages (and their anchors) resolve
        ids = {n: set(i['ids']) for n, i in report['pages'].items()}
        checked, n_links = set(), 0
        for name, info in report['pages'].items():
            for link in info['links']:
                if not _same_site(link, base): continue
                n_links += 1
                u = urllib.parse.urlsplit(link)
                path = urllib.parse.unquote(u.path).lstrip('/') or 'index.html'
                target = site/path
                if path.endswith('/'): target = target/'index.html'
                if not target.exists(): problems.append(f'{name}: broken link {link}'); continue
                if u.fragment and target.name in ids and target.parent == site:
                    frag = urllib.parse.unquote(u.fragment)
                    if frag not in ids[target.name] and (target.name, frag) not in checked:
                        checked.add((target.name, frag)); problems.append(f'{name}: link to a missing anchor {link}')
        report['internal_links'] = n_links
        if search_query:   # search answers a query, offline, from the site's own index
            cdp.send('Page.navigate', url=base + pages[0]); cdp.wait_event('Page.loadEventFired', timeout=30)
            cdp.eval("document.querySelector('.md-search__input').focus(); 1")
            cdp.send('Input.insertText', text=search_query)
            n = cdp.eval("""(async () => { const t0 = Date.now();
                while (document.querySelectorAll('.md-search-result__item').length === 0 && Date.now() - t0 < 15000)
                  await new Promise(r => setTimeout(r, 100));
                return document.querySelectorAll('.md-search-result__item').length; })()""", timeout=30)
            report['search_results'] = n
            if not n: problems.append(f'search for {search_query!r} found nothing')
            if shots:
                png = cdp.send('Page.captureScreenshot', format='png')['data']
                (Path(shots)/'search.png').write_bytes(base64.b64decode(png))
    return report


def screenshots(site: Path, targets: list[str], shots: Path, binary: str | None = None) -> list[Path]:
    "Screenshots of `targets` (page paths, `#anchor` allowed, e.g. `pde.html#count_laws`), after math is typeset"
    binary, out = binary or find_chromium(), []
    Path(shots).mkdir(parents=True, exist_ok=True)
    with serve(Path(site)) as base, chromium(binary) as cdp:
        for t in targets:
            cdp.send('Page.navigate', url='about:blank'); cdp.wait_event('Page.loadEventFired', timeout=30)
            cdp.send('Page.navigate', url=base + t); cdp.wait_event('Page.loadEventFired', timeout=30)
            cdp.eval(_PAGE_JS, timeout=90)
            if '#' in t: cdp.eval(f"document.getElementById({json.dumps(t.split('#', 1)[1])}).scrollIntoView(); 1")
            time.sleep(0.3)
            f = Path(shots)/(t.replace('.html', '').replace('#', '-').replace('/', '_') + '.png')
            f.write_bytes(base64.b64decode(cdp.send('Page.captureScreenshot', format='png')['data'])); out.append(f)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('site', nargs='?', default='docs', help='the built site (default: docs)')
    p.add_argument('--shots', default=None, help='save a screenshot of every page here')
    p.add_argument('--at', nargs='*', default=[], help='with --shots: extra screenshots at PAGE#ANCHOR')
    a = p.parse_args(argv)
    if a.shots and a.at: screenshots(Path(a.site), a.at, Path(a.shots))
    r = check_site(Path(a.site), shots=Path(a.shots) if a.shots else None)
    for name, i in r['pages'].items():
        print(f"{name:16s} math {i['math_typeset']}/{i['math']}  images {sum(m['ok'] for m in i['images'])}/"
              f"{len(i['images'])}  links {len(i['links'])}  console errors {len(i['errors'])}")
    print(f"internal links checked: {r['internal_links']}; search results: {r['search_results']}")
    for pr in r['problems']: print('PROBLEM', pr)
    return 1 if r['problems'] else 0


if __name__ == '__main__':
    sys.exit(main())
