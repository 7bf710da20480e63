"""Live replay client against an in-process fake of SGLang's streaming /generate (no SGLang)."""

import json
import signal
import subprocess
import sys
import threading
import time
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
    token_delay_s = 0.0
    seen: list = []
    info: dict = {"context_length": 300}  # what /server_info publishes
    context_len = 300

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b""
        if self.path == "/server_info":
            body = json.dumps(type(self).info).encode()
        self.send_response(200 if self.path in ("/health", "/server_info") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        # SGLang 0.5.23's limits (ppsched/experiments/server_limits.py): a prompt of
        # max_req_input_len or more is aborted; the output is cut to max_req_len - prompt - 1.
        max_req_len = type(self).context_len - 1
        prompt = len(body["input_ids"])
        if prompt >= max_req_len - 5:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(f"data: {json.dumps({'error': 'input too long'})}\n\n".encode())
            return
        n = min(body["sampling_params"]["max_new_tokens"], max_req_len - prompt - 1)
        n -= type(self).short_by
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for i in range(1, n + 1):
                time.sleep(type(self).token_delay_s)
                # Cumulative ids, as SGLang streams them without incremental streaming.
                chunk = {"output_ids": [len(body["input_ids"]) + k for k in range(i)],
                         "meta_info": {"completion_tokens": i,
                                       "finish_reason": {"type": "length"} if i == n else None}}
                if body.get("return_logprob"):
                    # SGLang's shape: per token, top_logprobs_num [logprob, id, text] entries.
                    chunk["meta_info"]["output_top_logprobs"] = [
                        [[-0.5 - j, len(body["input_ids"]) + k + j, None]
                         for j in range(body["top_logprobs_num"])] for k in range(i)]
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def fake_server():
    FakeSGLang.short_by = 0
    FakeSGLang.token_delay_s = 0.0
    FakeSGLang.seen = []
    FakeSGLang.info = {"context_length": 300}
    FakeSGLang.context_len = 300
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


def test_top_logprobs_are_asked_for_and_kept_per_token(fake_server):
    _, results = replay(fake_server, specs(4), ReplayOptions(top_logprobs=2))
    assert all(b["return_logprob"] and b["top_logprobs_num"] == 2 for b in FakeSGLang.seen)
    first = 8  # request 3: 8 prompt ids, 6 output tokens
    assert results[3].top_logprobs == [[(first + k, -0.5), (first + k + 1, -1.5)]
                                       for k in range(6)]
    FakeSGLang.seen = []
    _, plain = replay(fake_server, specs(2), ReplayOptions())
    assert all("return_logprob" not in b for b in FakeSGLang.seen)
    assert all(r.top_logprobs == [] for r in plain)
    with pytest.raises(UserError, match="top_logprobs=-1"):
        ReplayOptions(top_logprobs=-1)


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


def _run(url, out, *extra):
    return main(["run", "--engine", url, "--workload", "synthetic-decode", "--rate", "50",
                 "--num-requests", "6", "--out", str(out), "--progress-every", "0", *extra])


def test_summary_reads_like_bench_serving(fake_server, tmp_path, capsys):
    FakeSGLang.token_delay_s = 0.002
    assert _run(fake_server, tmp_path / "a") == 0
    out = capsys.readouterr().out
    for head in ("throughput ", "TTFT ", "TPOT ", "ITL ", "E2E ", "SLO ", "goodput ", "clock "):
        assert any(line.startswith(head) for line in out.splitlines()), head
    assert "mean" in out and "p99" in out and "scheduled arrival" in out
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    done = json.loads((tmp_path / "a" / "summary.json").read_text())["completed"]
    assert done == 6 and summary["request_throughput_rps"] > 0
    # from the server's context length (300): what SGLang 0.5.23 serves in full
    assert summary["live_max_context"] == 298 and summary["live_max_prompt"] == 293
    assert summary["itl_ms"]["p50"] >= 1.0  # 2 ms per token, pooled


def test_failures_are_listed_by_reason(fake_server, tmp_path, capsys):
    FakeSGLang.short_by = 1
    assert _run(fake_server, tmp_path / "a") == 1
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    reasons = summary["live_failures_by_reason"]
    assert sum(reasons.values()) == 6 and all("tokens" in r for r in reasons)
    failed = [line for line in out.splitlines() if line.startswith("failed ")]
    assert len(failed) == len(reasons) and all(" x got " in line for line in failed)


def test_itl_is_pooled_over_every_token():
    from ppsched.experiments.live_summary import pooled_itl_ms

    gaps = pooled_itl_ms([[0.0, 0.1, 0.3], [1.0, 1.05]])
    assert [round(g, 6) for g in gaps] == [100.0, 200.0, 50.0]


def test_ttft_from_send_excludes_the_wait_for_a_connection(fake_server):
    FakeSGLang.token_delay_s = 0.1
    two = [RequestSpec(0, 0.0, 5, 3), RequestSpec(1, 0.0, 5, 3)]  # one connection: 1 waits
    arrival, _ = replay(fake_server, two, ReplayOptions(concurrency=1))
    send, _ = replay(fake_server, two, ReplayOptions(concurrency=1, ttft_from="send"))
    waited = max(arrival, key=lambda r: r.ttft_ms)
    assert waited.ttft_ms >= 300  # 3 tokens x 100 ms of the other request, then its own
    assert max(r.ttft_ms for r in send) < 250  # only its own first token
    assert all(abs(a.tpot_ms - b.tpot_ms) < 60 for a, b in zip(arrival, send, strict=True))


@pytest.mark.parametrize("flag", [["--chunk", "predictive"], ["--ds", "on"]])
def test_live_refuses_policy_flags(fake_server, tmp_path, capsys, flag):
    assert _run(fake_server, tmp_path / "a", *flag) == 2
    err = capsys.readouterr().err
    assert flag[0] in err and "ppsched serve" in err


def test_time_limit_writes_partial_results(fake_server, tmp_path, capsys):
    FakeSGLang.token_delay_s = 0.005
    # Arrivals at 1.6, 2.0, 2.7, 2.8, 2.9, 3.8 s (seed 0); ~0.15 s of tokens each: the first
    # finishes well inside the limit, the last is never sent.
    code = main(["run", "--engine", fake_server, "--workload", "synthetic-decode", "--rate",
                 "2", "--num-requests", "6", "--max-context", "30", "--out", str(tmp_path / "a"),
                 "--time-limit", "3.3", "--progress-every", "0.3"])
    captured = capsys.readouterr()
    assert code == 130
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["live_interrupted"].startswith("--time-limit")
    assert summary["requests"] == 6 and 0 < summary["live_failed"] < 6
    assert all(r.startswith("unfinished: --time-limit") for r in summary["live_failures"])
    assert "PARTIAL" in captured.out and "progress " in captured.err
    assert len(pd.read_csv(tmp_path / "a" / "requests.csv")) == 6


def test_sigterm_writes_partial_results(fake_server, tmp_path):
    FakeSGLang.token_delay_s = 0.05
    proc = subprocess.Popen([sys.executable, "-m", "ppsched.cli.main", "run", "--engine",
                             fake_server, "--workload", "synthetic-decode", "--rate", "20",
                             "--num-requests", "8", "--out", str(tmp_path / "a")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(FakeSGLang.seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - t < 10  # open streams were closed, not waited for
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["live_interrupted"].startswith("interrupted")
    assert "PARTIAL" in out


def test_requests_over_the_server_limits_are_capped_to_what_it_serves(fake_server, tmp_path):
    """Every request of a workload longer than the server's context completes in full: prompt
    + output are capped at max_req_len - 1 and the prompt below max_req_input_len, the limits
    /server_info publishes (here those of --context-length 1024)."""
    FakeSGLang.context_len = 1024
    FakeSGLang.info = {"context_length": 1024, "max_req_input_len": 1018}
    out = tmp_path / "a"
    assert main(["run", "--engine", fake_server, "--workload", "synthetic-prefill", "--rate",
                 "200", "--num-requests", "30", "--out", str(out), "--progress-every",
                 "0"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["live_failed"] == 0 and summary["completed"] == 30
    assert summary["live_max_context"] == 1022 and summary["live_max_prompt"] == 1017
    sent = [(len(b["input_ids"]), b["sampling_params"]["max_new_tokens"])
            for b in FakeSGLang.seen]
    assert max(p + o for p, o in sent) == 1022  # some requests were capped, to the limit
    assert max(p for p, _ in sent) <= 1017


def test_max_context_given_replaces_the_server_limits(fake_server, tmp_path):
    """--max-context is taken as given, even past what the server serves: those requests fail
    and say why, none is dropped."""
    FakeSGLang.context_len = 1024
    FakeSGLang.info = {"context_length": 1024, "max_req_input_len": 1018}
    out = tmp_path / "a"
    assert main(["run", "--engine", fake_server, "--workload", "synthetic-prefill", "--rate",
                 "200", "--num-requests", "30", "--max-context", "1024", "--out", str(out),
                 "--progress-every", "0"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["live_max_context"] == 1024 and summary["live_max_prompt"] is None
    assert 0 < summary["live_failed"] < 30
    assert summary["completed"] + summary["live_failed"] == 30
