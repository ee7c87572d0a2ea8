"""The official `openai` Python client against `magicpig serve` (completions and chat, with and
without streaming, logprobs, usage, the policy extension, errors), as a user would call it.
Run by tests/server/run_client_tests.sh with the client virtual environment's python."""
import argparse
import sys
import unittest

import openai

from serve_process import Server

ARGS = None


class OpenAIClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(ARGS.magicpig, ARGS.model, "--api-key", "test-key", "-np", "4")
        cls.client = openai.OpenAI(base_url=cls.server.url + "/v1", api_key="test-key", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, f"magicpig serve exited with {code} on SIGTERM"

    def test_models(self):
        models = self.client.models.list()
        self.assertEqual(len(models.data), 1)
        self.assertTrue(models.data[0].id.endswith(".gguf"))

    def test_completion_whole_and_streamed_agree(self):
        kw = dict(model="m", prompt="Once upon a time", max_tokens=20, temperature=0)
        whole = self.client.completions.create(**kw)
        self.assertEqual(whole.object, "text_completion")
        self.assertEqual(whole.choices[0].finish_reason, "length")
        self.assertEqual(whole.usage.completion_tokens, 20)
        self.assertGreater(whole.usage.prompt_tokens, 1)
        parts = []
        finish = None
        for chunk in self.client.completions.create(stream=True, **kw):
            parts.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        self.assertGreater(len(parts), 2)
        self.assertEqual("".join(parts), whole.choices[0].text)
        self.assertEqual(finish, "length")

    def test_chat_whole_and_streamed_agree(self):
        msgs = [{"role": "system", "content": "You tell stories."},
                {"role": "user", "content": "Tell me about a dog."}]
        whole = self.client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
        self.assertEqual(whole.choices[0].message.role, "assistant")
        text = whole.choices[0].message.content
        self.assertTrue(text)
        deltas = []
        usage = None
        stream = self.client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0,
                                                     stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].delta.content:
                deltas.append(chunk.choices[0].delta.content)
        self.assertEqual("".join(deltas), text)
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)

    def test_chat_logprobs(self):
        r = self.client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hello"}], max_tokens=5, temperature=0,
            logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        for t in content:
            self.assertLessEqual(t.logprob, 0)
            self.assertEqual(len(t.top_logprobs), 3)
            self.assertAlmostEqual(t.top_logprobs[0].logprob, t.logprob, places=6)

    def test_policy_extension_and_cost(self):
        prompt = "The cat sat on the mat and looked at the bird. " * 50
        r = self.client.completions.create(
            model="m", prompt=prompt, max_tokens=6, temperature=0,
            extra_body={"magicpig": {"attn": "magicpig", "K": 8, "L": 75}})
        ext = r.usage.model_extra["magicpig"]
        self.assertEqual(ext["attn"], "magicpig")
        self.assertGreater(ext["keys_read_fraction"], 0)
        self.assertLess(ext["keys_read_fraction"], 0.5)

    def test_seeded_sampling_repeats(self):
        kw = dict(model="m", prompt="Lily and Tom", max_tokens=12, temperature=0.9, seed=7)
        a = self.client.completions.create(**kw).choices[0].text
        b = self.client.completions.create(**kw).choices[0].text
        self.assertEqual(a, b)

    def test_errors_are_raised_as_the_client_expects(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model="m", prompt="x", max_tokens=10**9)
        self.assertIn("context", str(e.exception))
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model="m", prompt="x", extra_body={"magicpig": {"attn": "nope"}})
        bad = openai.OpenAI(base_url=self.server.url + "/v1", api_key="wrong", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--magicpig", required=True)
    p.add_argument("--model", required=True)
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
