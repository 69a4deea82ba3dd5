"""A small Hugging Face Hub-compatible HTTP server for tests (stdlib only), answering the requests huggingface_hub's
own client sends (HfApi and hf_hub_download: `hf_api.py`, `file_download.py`, `lfs.py` in huggingface_hub's source):
repos, branches, tags, commits (NDJSON), preupload, LFS batch + PUT to
a separate "CDN" host name, resolve with 302 for LFS files, Range requests, tree/paths-info/refs,
and the client's error headers. Anything it does not implement answers 501 with the path, so client
drift fails loudly. Blobs live in memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socketserver
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

TOKEN = "hf_test_token_eaglezoo"
LFS_MIN = 10 * 1024 * 1024


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, private: bool):
        self.private = private
        self.commits: dict[str, dict] = {}
        self.branches: dict[str, str | None] = {"main": None}
        self.tags: dict[str, str] = {}
        self.prs: list[str] = []

    def resolve(self, rev: str) -> str | None:
        if rev in self.branches:
            return self.branches[rev]
        if rev in self.tags:
            return self.tags[rev]
        if rev in self.commits:
            return rev
        m = re.fullmatch(r"refs/pr/(\d+)", rev)
        if m and int(m.group(1)) <= len(self.prs):
            return self.prs[int(m.group(1)) - 1]
        return None

    def files(self, sha: str | None) -> dict[str, dict]:
        return dict(self.commits[sha]["files"]) if sha else {}


class Hub:
    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.blobs: dict[str, bytes] = {}  # sha256 (lfs) or git sha1 (regular) -> bytes
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.extra_siblings: dict[str, list[str]] = {}  # repo -> malicious names listed but absent
        self.fail_next = 0  # answer this many requests with 503 (network trouble)
        self.unauthorized: set[str] = set()  # repos that answer 401 to everyone (private, token cannot see them)
        self.trickle_s = 0.0  # pause before each 64 KiB of a file's bytes: a slow download that keeps moving
        self.cut_once_at: int | None = (
            None  # the next full download of a file drops its connection after this many bytes
        )
        self.info_sha: dict[str, str | None] = {}  # repo -> the commit its info answers claim (a hostile Hub)
        self.tree_extra: dict[str, list[str]] = {}  # repo -> names its tree lists but its info does not

    def commit(self, repo_id: str, add: dict[str, bytes], delete: tuple[str, ...] = (), title: str = "seed") -> str:
        """A commit on main made server-side (tests seed repos with it); *.safetensors files are LFS."""
        repo = self.repos.setdefault(repo_id, Repo(private=False))
        parent = repo.branches["main"]
        files = repo.files(parent)
        for name, data in add.items():
            if name.endswith(".safetensors"):
                oid = hashlib.sha256(data).hexdigest()
                self.blobs[oid] = data
                files[name] = {"oid": git_blob_sha1(b"lfs pointer " + oid.encode()), "size": len(data), "lfs": oid}
            else:
                self.blobs[git_blob_sha1(data)] = data
                files[name] = {"oid": git_blob_sha1(data), "size": len(data), "lfs": None}
        for name in delete:
            files.pop(name)
        sha = hashlib.sha1(json.dumps([repo_id, parent, sorted(files.items()), title]).encode()).hexdigest()
        repo.commits[sha] = {"files": files, "parent": parent, "title": title, "date": "2026-11-23T00:00:00Z"}
        repo.branches["main"] = sha
        return sha


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: Hub
    base: str
    cdn: str

    def log_message(self, *args):
        pass

    # -- plumbing ---------------------------------------------------------------------------
    def _send(self, code=200, body=b"", headers=None, ctype="application/json", pause=0.0, cut_at=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        sent = body[:cut_at]  # all of it unless cut
        step = 64 * 1024 if pause else max(len(sent), 1)
        for start in range(0, len(sent), step):
            time.sleep(pause)
            self.wfile.write(sent[start : start + step])
        if cut_at is not None:
            self.close_connection = True  # the body ends early, as when a connection drops

    def _error(self, code, error_code=None, message="", headers=None):
        h = dict(headers or {})
        if error_code:
            h["X-Error-Code"] = error_code
        h["X-Error-Message"] = message
        self._send(code, {"error": message}, h)

    def _body(self) -> bytes:
        return self._raw

    def _auth(self, required: bool) -> bool:
        header = self.headers.get("Authorization")
        if header is None:
            if required:
                self._error(401, None, "Invalid credentials: a token is required")
                return False
            return True
        if header != f"Bearer {TOKEN}":
            self._error(401, None, "Invalid credentials in Authorization header")
            return False
        return True

    def _repo(self, repo_id: str, rev: str | None = None):
        repo = self.hub.repos.get(repo_id)
        if repo_id in self.hub.unauthorized:
            self._error(401, "RepoNotFound", "Repository not found: invalid credentials or private repository")
            return None, None
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            return None, None
        if rev is None:
            return repo, repo.branches["main"]
        sha = repo.resolve(rev)
        if sha is None and rev not in repo.branches:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None, None
        return repo, sha

    def _dispatch(self):
        n = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(n) if n else b""  # always consume the body: keep-alive connections
        self.hub.requests.append((self.command, self.path))
        if self.hub.fail_next > 0:
            self.hub.fail_next -= 1
            return self._error(503, None, "temporarily unavailable")
        url = urlparse(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        for pattern, method, fn in ROUTES:
            if method != self.command and not (method == "GET" and self.command == "HEAD"):
                continue
            m = re.fullmatch(pattern, path)
            if m:
                with self.hub.lock:
                    return fn(self, *m.groups(), query=query)
        self._error(501, None, f"fakehub does not implement {self.command} {path}")

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    # -- endpoints ----------------------------------------------------------------------------
    def whoami(self, query):
        if self._auth(True):
            self._send(200, {"name": "tester", "type": "user", "orgs": [], "auth": {"type": "access_token"}})

    def create_repo(self, query):
        if not self._auth(True):
            return
        data = json.loads(self._body() or b"{}")
        repo_id = f"{data.get('organization') or 'tester'}/{data['name']}"
        url = {"url": f"{self.base}/{repo_id}"}
        if repo_id in self.hub.repos:
            return self._send(409, {**url, "error": "You already created this model repo"})
        self.hub.repos[repo_id] = Repo(private=data.get("visibility") == "private" or bool(data.get("private")))
        self._send(200, url)

    def info(self, repo_id, rev, query):
        if not self._auth(False):
            return
        repo, sha = self._repo(repo_id, rev or "main")
        if repo is None:
            return
        siblings = []
        for p, f in repo.files(sha).items():
            s = {"rfilename": p, "size": f["size"], "blobId": f["oid"]}
            if f["lfs"]:
                s["lfs"] = {"sha256": f["lfs"], "size": f["size"], "pointerSize": 130}
            siblings.append(s)
        siblings += [{"rfilename": p} for p in self.hub.extra_siblings.get(repo_id, [])]
        claimed = self.hub.info_sha.get(repo_id, sha or "0" * 40)
        self._send(
            200,
            {
                "id": repo_id,
                "modelId": repo_id,
                "sha": claimed,
                "siblings": siblings,
                "private": repo.private,
                "cardData": self._card_data(repo.files(sha)),
                "tags": [],
            },
        )

    def _card_data(self, files: dict) -> dict:
        """The README's YAML front matter, as the Hub parses it into cardData."""
        readme = files.get("README.md")
        text = self.hub.blobs[readme["oid"]].decode() if readme and not readme["lfs"] else ""
        if not text.startswith("---\n") or "\n---" not in text[4:]:
            return {}
        import yaml

        data = yaml.safe_load(text[4 : text.index("\n---", 4)])
        return data if isinstance(data, dict) else {}

    def _entry(self, p, f):
        e = {"type": "file", "path": p, "size": f["size"], "oid": f["oid"]}
        if f["lfs"]:
            e["lfs"] = {"oid": f["lfs"], "size": f["size"], "pointerSize": 130}
        return e

    def tree(self, repo_id, rev, sub, query):
        if not self._auth(False):
            return
        repo, sha = self._repo(repo_id, rev)
        if repo is None:
            return
        files = repo.files(sha)
        prefix = (sub or "").strip("/")
        entries = [self._entry(p, f) for p, f in sorted(files.items()) if not prefix or p.startswith(prefix + "/")]
        entries += [
            {"type": "file", "path": p, "size": 1, "oid": "0" * 40}
            for p in self.hub.extra_siblings.get(repo_id, []) + self.hub.tree_extra.get(repo_id, [])
        ]
        self._send(200, entries)

    def paths_info(self, repo_id, rev, query):
        repo, sha = self._repo(repo_id, rev)
        if repo is None:
            return
        form = parse_qs(self._body().decode())
        files = repo.files(sha)
        self._send(200, [self._entry(p, files[p]) for p in form.get("paths", []) if p in files])

    def refs(self, repo_id, query):
        repo, _ = self._repo(repo_id)
        if repo is None:
            return

        def ref(kind: str, name: str, sha: str) -> dict:
            return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": sha}

        self._send(
            200,
            {
                "branches": [ref("heads", b, s) for b, s in repo.branches.items() if s],
                "tags": [ref("tags", t, s) for t, s in repo.tags.items()],
                "converts": [],
                "pullRequests": [ref("pr", str(i + 1), s) for i, s in enumerate(repo.prs)],
            },
        )

    def commits(self, repo_id, rev, query):
        repo, sha = self._repo(repo_id, rev)
        if repo is None:
            return
        out = []
        while sha:
            c = repo.commits[sha]
            out.append(
                {
                    "id": sha,
                    "title": c["title"],
                    "message": c["title"],
                    "date": c["date"],
                    "authors": [{"user": "tester"}],
                }
            )
            sha = c["parent"]
        self._send(200, out)

    def branch(self, repo_id, name, query):
        if not self._auth(True):
            return
        repo, _ = self._repo(repo_id)
        if repo is None:
            return
        if name in repo.branches:
            return self._error(409, None, f"Branch {name} already exists")
        data = json.loads(self._body() or b"{}")
        start = repo.resolve(data.get("startingPoint") or "main")
        repo.branches[name] = start
        self._send(200, {})

    def tag(self, repo_id, rev, query):
        if not self._auth(True):
            return
        repo, sha = self._repo(repo_id, rev)
        if repo is None:
            return
        data = json.loads(self._body())
        if data["tag"] in repo.tags:
            return self._error(409, None, f"Tag {data['tag']} already exists")
        repo.tags[data["tag"]] = sha
        self._send(200, {})

    def validate_yaml(self, query):
        self._send(200, {"errors": [], "warnings": []})

    def preupload(self, repo_id, rev, query):
        if not self._auth(True):
            return
        repo, sha = self._repo(repo_id, rev)
        if repo is None:
            return
        files = repo.files(sha)
        out = []
        for f in json.loads(self._body())["files"]:
            lfs = f["size"] >= LFS_MIN or f["path"].endswith((".safetensors", ".bin"))
            remote = files.get(f["path"])
            oid = (remote["lfs"] if lfs else remote["oid"]) if remote else None
            out.append(
                {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        self._send(200, {"files": out})

    def lfs_batch(self, repo_id, query):
        if not self._auth(True):
            return
        data = json.loads(self._body())
        objects = []
        for o in data["objects"]:
            obj = {"oid": o["oid"], "size": o["size"]}
            if o["oid"] not in self.hub.blobs:
                obj["actions"] = {"upload": {"href": f"{self.cdn}/upload/{o['oid']}"}}
            objects.append(obj)
        self._send(200, {"transfer": "basic", "objects": objects}, ctype="application/vnd.git-lfs+json")

    def upload(self, oid, query):
        data = self._body()
        if hashlib.sha256(data).hexdigest() != oid:
            return self._error(400, None, "sha256 mismatch")
        self.hub.blobs[oid] = data
        self._send(200, {})

    def commit(self, repo_id, rev, query):
        if not self._auth(True):
            return
        repo, parent = self._repo(repo_id, rev)
        if repo is None:
            return
        files = repo.files(parent)
        title = ""
        for line in self._body().decode().splitlines():
            item = json.loads(line)
            v = item["value"]
            if item["key"] == "header":
                title = v.get("summary", "")
            elif item["key"] == "file":
                data = base64.b64decode(v["content"])
                oid = git_blob_sha1(data)
                self.hub.blobs[oid] = data
                files[v["path"]] = {"oid": oid, "size": len(data), "lfs": None}
            elif item["key"] == "lfsFile":
                if v["oid"] not in self.hub.blobs:
                    return self._error(400, None, f"LFS object {v['oid']} was never uploaded")
                files[v["path"]] = {
                    "oid": git_blob_sha1(b"lfs pointer " + v["oid"].encode()),
                    "size": v["size"],
                    "lfs": v["oid"],
                }
            elif item["key"] == "deletedFile":
                files.pop(v["path"], None)
        sha = hashlib.sha1(json.dumps([parent, sorted(files.items()), time.time()], default=str).encode()).hexdigest()
        repo.commits[sha] = {"files": files, "parent": parent, "title": title, "date": "2026-11-22T00:00:00Z"}
        pr_url = None
        if query.get("create_pr"):
            repo.prs.append(sha)
            pr_url = f"{self.base}/{repo_id}/discussions/{len(repo.prs)}"
        else:
            repo.branches[rev] = sha
        self._send(
            200, {"commitOid": sha, "commitUrl": f"{self.base}/{repo_id}/commit/{sha}", "pullRequestUrl": pr_url}
        )

    def resolve(self, repo_id, rev, path, query):
        if not self._auth(False):
            return
        repo, _ = self._repo(repo_id)
        if repo is None:
            return
        sha = repo.resolve(rev)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        f = repo.files(sha).get(path)
        if f is None:
            return self._error(404, "EntryNotFound", f"{path} does not exist", {"X-Repo-Commit": sha})
        common = {"X-Repo-Commit": sha}
        if f["lfs"]:
            return self._send(
                302,
                b"",
                {
                    **common,
                    "Location": f"{self.cdn}/blob/{f['lfs']}",
                    "X-Linked-Etag": f'"{f["lfs"]}"',
                    "X-Linked-Size": str(f["size"]),
                    "ETag": f'"{f["oid"]}"',
                },
            )
        self._serve_bytes(self.hub.blobs[f["oid"]], {**common, "ETag": f'"{f["oid"]}"'})

    def blob(self, oid, query):
        data = self.hub.blobs.get(oid)
        if data is None:
            return self._error(404, "EntryNotFound", "no such blob")
        self._serve_bytes(data, {"ETag": f'"{oid}"'})

    def _serve_bytes(self, data: bytes, headers: dict):
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            start, end = int(m.group(1)), int(m.group(2)) if m.group(2) else len(data) - 1
            end = min(end, len(data) - 1)
            part = data[start : end + 1]
            return self._send(
                206,
                part,
                {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}", "Accept-Ranges": "bytes"},
                ctype="application/octet-stream",
            )
        cut, self.hub.cut_once_at = self.hub.cut_once_at, None
        self._send(
            200,
            data,
            {**headers, "Accept-Ranges": "bytes"},
            ctype="application/octet-stream",
            pause=self.hub.trickle_s,
            cut_at=cut,
        )


ID = r"([^/]+/[^/]+)"
ROUTES = [
    (r"/api/whoami-v2", "GET", Handler.whoami),
    (r"/api/repos/create", "POST", Handler.create_repo),
    (rf"/api/models/{ID}/tree/([^/]+)(/.*)?", "GET", Handler.tree),
    (rf"/api/models/{ID}/paths-info/([^/]+)", "POST", Handler.paths_info),
    (rf"/api/models/{ID}/refs", "GET", Handler.refs),
    (rf"/api/models/{ID}/commits/([^/]+)", "GET", Handler.commits),
    (rf"/api/models/{ID}/branch/([^/]+)", "POST", Handler.branch),
    (rf"/api/models/{ID}/tag/([^/]+)", "POST", Handler.tag),
    (rf"/api/models/{ID}/preupload/([^/]+)", "POST", Handler.preupload),
    (rf"/api/models/{ID}/commit/([^/]+)", "POST", Handler.commit),
    (rf"/api/models/{ID}/revision/([^/]+)", "GET", lambda h, rid, rev, query: h.info(rid, rev, query=query)),
    (rf"/api/models/{ID}", "GET", lambda h, rid, query: h.info(rid, None, query=query)),
    (r"/api/validate-yaml", "POST", Handler.validate_yaml),
    # datasets: the same store, under "datasets/OWNER/NAME" (Hub.commit("datasets/o/n", ...) seeds one)
    (
        rf"/api/datasets/{ID}/revision/([^/]+)",
        "GET",
        lambda h, rid, rev, query: h.info(f"datasets/{rid}", rev, query=query),
    ),
    (
        rf"/api/datasets/{ID}/tree/([^/]+)(/.*)?",
        "GET",
        lambda h, rid, rev, sub, query: h.tree(f"datasets/{rid}", rev, sub, query=query),
    ),
    (rf"/api/datasets/{ID}", "GET", lambda h, rid, query: h.info(f"datasets/{rid}", None, query=query)),
    (
        rf"/datasets/{ID}/resolve/([^/]+)/(.+)",
        "GET",
        lambda h, rid, rev, path, query: h.resolve(f"datasets/{rid}", rev, path, query=query),
    ),
    (rf"/{ID}\.git/info/lfs/objects/batch", "POST", Handler.lfs_batch),
    (r"/upload/([0-9a-f]{64})", "PUT", Handler.upload),
    (r"/blob/([0-9a-f]{64})", "GET", Handler.blob),
    (rf"/{ID}/resolve/([^/]+)/(.+)", "GET", Handler.resolve),
]


class HubServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that hangs up mid-answer (eaglezoo cutting a download off) is logged to the real stderr: the
        server runs in the test's process, where a CLI run in that process reads sys.stderr as the command's own."""
        print(f"fake hub: error answering {client_address}", file=sys.__stderr__)
        traceback.print_exc(file=sys.__stderr__)


def serve(host: str = "127.0.0.1", port: int = 0):
    """Starts the server in a thread; returns (hub, endpoint, server). The CDN is the same server
    under the host name 'localhost', so the client's same-host redirect rule is exercised."""
    hub = Hub()
    handler = type("BoundHandler", (Handler,), {"hub": hub})
    server = HubServer((host, port), handler)
    port = server.server_address[1]
    handler.base = f"http://{host}:{port}"
    handler.cdn = f"http://localhost:{port}"
    # a short poll: shutdown() waits for it (serve_forever's default is 0.5 s); kept here, as this file also runs alone
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return hub, handler.base, server


if __name__ == "__main__":  # manual use: python tests/support/fakehub.py
    _, endpoint, srv = serve(port=8765)
    print(f"fake hub on {endpoint} (token {TOKEN})")
    srv.serve_forever()


# Servers that are not a Hub at all: they accept a connection and then say nothing (or only headers).


def serve_raw(answer):
    """A TCP server that hands each connection to `answer(conn, released)`; `released` is set on teardown."""
    released = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            answer(self.request, released)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # a short poll: shutdown() waits for it (serve_forever's default is 0.5 s); kept here, as this file also runs alone
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, released


def never_answer(conn, released):
    released.wait()


def stall_after_headers(conn, released):
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = conn.recv(65536)
        if not chunk:
            return
        request += chunk
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    released.wait()
