"""Records the HTTP requests the official `openai` Python client sends (as tests/server/
openai_client_test.py makes them) into fuzz/seeds/server/openai-*.http, the real-client part of
fuzz_server_request's starting corpus. A local socket stands in for the server: it keeps each
request's bytes and answers 400, so the client raises at once (max_retries=0).
Run with the client environment of scripts/setup_client.sh:
  ~/.cache/magicpig/venv-client/bin/python fuzz/capture_openai_requests.py"""
import os
import socket
import threading

import openai

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "server")
ERROR = b'{"error": {"message": "recorded", "type": "invalid_request_error", "param": null, "code": null}}'


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def serve(sock, recorded):
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            req = read_request(conn)
            if req:
                recorded.append(req)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(ERROR)).encode() + b"\r\nConnection: close\r\n\r\n" + ERROR)


def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    recorded = []
    threading.Thread(target=serve, args=(sock, recorded), daemon=True).start()
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1", api_key="test-key", max_retries=0)
    msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Tell me about a dog."}]
    calls = {
        "completion": lambda: client.completions.create(model="m", prompt="Once upon a time", max_tokens=20,
                                                       temperature=0),
        "completion-stream-logprobs": lambda: client.completions.create(
            model="m", prompt="Once upon a time", max_tokens=8, logprobs=3, stream=True, seed=7, stop=["\n", "The"]),
        "completion-token-ids": lambda: client.completions.create(model="m", prompt=[1, 450, 4996], max_tokens=4,
                                                                 top_p=0.9, extra_body={"top_k": 40, "min_p": 0.05}),
        "chat": lambda: client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0),
        "chat-stream-usage": lambda: client.chat.completions.create(
            model="m", messages=msgs, max_tokens=16, temperature=0, stream=True,
            stream_options={"include_usage": True}),
        "chat-logprobs": lambda: client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], max_completion_tokens=4, logprobs=True,
            top_logprobs=2),
        "chat-extension": lambda: client.chat.completions.create(
            model="m", messages=[{"role": "developer", "content": "Be brief."},
                                 {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
                                 {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "More"}],
            max_tokens=8, extra_body={"magicpig": {"attn": "magicpig", "K": 10, "L": 150}, "ignore_eos": True}),
        "chat-penalty-refused": lambda: client.chat.completions.create(
            model="m", messages=msgs, max_tokens=4, presence_penalty=0.5),
    }
    os.makedirs(OUT, exist_ok=True)
    for name, call in calls.items():
        before = len(recorded)
        try:
            call()
        except openai.APIError:
            pass
        assert len(recorded) == before + 1, f"{name}: no request recorded"
        with open(os.path.join(OUT, f"openai-{name}.http"), "wb") as f:
            f.write(recorded[-1])
    sock.close()
    print(f"wrote {len(calls)} requests to {OUT}")


if __name__ == "__main__":
    main()
