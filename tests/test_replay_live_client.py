"""Live replay client against an in-process fake of SGLang's streaming /generate (no SGLang)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from ppsched.cli.main import main
from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.experiments.live_replay import ReplayOptions, prompt_ids, replay
from ppsched.sglang_patch.http_client import Endpoint


class FakeSGLang(BaseHTTPRequestHandler):
    short_by = 0  # tokens the fake drops (to test exact-length checking)
    seen: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        n = body["sampling_params"]["max_new_tokens"] - type(self).short_by
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for i in range(1, n + 1):
                # Cumulative ids, as SGLang streams them without incremental streaming.
                chunk = {"output_ids": [len(body["input_ids"]) + k for k in range(i)],
                         "meta_info": {"completion_tokens": i,
                                       "finish_reason": {"type": "length"} if i == n else None}}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def fake_server():
    FakeSGLang.short_by = 0
    FakeSGLang.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeSGLang)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def specs(n):
    return [RequestSpec(i, 0.01 * i, 5 + i, 3 + i % 4) for i in range(n)]


def test_replay_exact_lengths_and_times(fake_server):
    records, results = replay(fake_server, specs(12), ReplayOptions(concurrency=4))
    assert all(not r.rejected for r in records)
    assert [r.completion_tokens for r in results] == [3 + i % 4 for i in range(12)]
    assert all(r.first_token_s <= r.finish_s for r in records)
    sent = sorted(FakeSGLang.seen, key=lambda b: len(b["input_ids"]))
    assert [len(b["input_ids"]) for b in sent] == [5 + i for i in range(12)]
    assert all(b["sampling_params"]["ignore_eos"] and b["stream"] for b in sent)
    assert results[3].output_ids == [8, 9, 10, 11, 12, 13][:6]


def test_short_outputs_and_client_aborts_are_not_completions(fake_server):
    FakeSGLang.short_by = 1
    records, _ = replay(fake_server, specs(3), ReplayOptions())
    assert all(r.rejected and "tokens" in r.reject_reason for r in records)
    FakeSGLang.short_by = 0
    records, results = replay(fake_server, specs(4),
                              ReplayOptions(abort_ids=frozenset({1}), abort_after_tokens=1))
    assert records[1].rejected and results[1].aborted_by_client
    assert not records[0].rejected and not records[2].rejected


def test_prompt_ids_are_deterministic():
    spec = RequestSpec(7, 0.0, 50, 4)
    assert prompt_ids(spec, 1) == prompt_ids(spec, 1) != prompt_ids(spec, 2)
    assert all(10 <= t < 1000 for t in prompt_ids(spec, 1))


def test_cli_writes_simulator_outputs(fake_server, tmp_path, capsys):
    out = tmp_path / "live"
    code = main(["run", "--engine", fake_server, "--workload", "synthetic-decode",
                 "--rate", "50", "--num-requests", "6", "--max-context", "256",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr()
    frame = pd.read_csv(out / "requests.csv")
    assert len(frame) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["live_failed"] == 0 and summary["engine"] == fake_server
    assert len((out / "outputs.jsonl").read_text().splitlines()) == 6


def test_cli_no_server_is_a_clear_error(tmp_path, capsys):
    from ppsched.sglang_patch.cpu_server import free_port

    code = main(["run", "--engine", f"http://127.0.0.1:{free_port()}", "--workload",
                 "synthetic-decode", "--num-requests", "2", "--out", str(tmp_path / "x")])
    assert code == 2
    assert "no SGLang server answers there" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["ftp://h:1", "http://", "http://h:notaport", "localhost:30000"])
def test_bad_engine_urls(url):
    with pytest.raises(UserError, match="expected http://HOST:PORT"):
        Endpoint.parse(url)


def test_bad_replay_options():
    with pytest.raises(UserError, match="concurrency"):
        ReplayOptions(concurrency=0)
    with pytest.raises(UserError, match="timeout"):
        ReplayOptions(timeout_s=0)
