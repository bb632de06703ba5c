"""Renders the real chat templates shipped with the pinned llama.cpp source
(models/templates/*.jinja, copied from the models' Hugging Face repositories)
with jinja2 the way transformers' apply_chat_template does (trim_blocks,
lstrip_blocks, loopcontrols, raise_exception, strftime_now, tojson;
add_generation_prompt on) for three conversations, and writes what each
gives to tests/data/chat_templates.json. test_chat_templates_real renders
the same conversations with EntMTP's fixed formats and compares.

  python3 tests/python/record_chat_fixtures.py <llama.cpp src>/models/templates

"today" is fixed at 26 Jul 2024 (the test passes the same day). The output
drops the template's leading bos_token: EntMTP leaves the BOS to the
tokenizer. Templates EntMTP does not render are marked "unsupported": the
test expects ENTMTP_ERR_UNSUPPORTED and the CLI's documented plain prompt.
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# family templates EntMTP renders, and the Mistral [SYSTEM_PROMPT] ones it does not
TEMPLATES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "qwen2",
    "Qwen-Qwen3-0.6B.jinja": "qwen3",
    "Qwen-QwQ-32B.jinja": "qwen2",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama",
    "microsoft-Phi-3.5-mini-instruct.jinja": "phi3",
    "google-gemma-2-2b-it.jinja": "gemma2",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "llama (Mistral)",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "llama (DeepSeek-R1 distill)",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "qwen2 (DeepSeek-R1 distill)",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "unsupported",
    "unsloth-mistral-Devstral-Small-2507.jinja": "unsupported",
}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hi there"}],
    "system": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi there\n"}],
    "multi": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}],
}


def raise_exception(message):
    raise jinja2.TemplateError(message)


def main():
    folder = sys.argv[1]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    env.filters["tojson"] = lambda x, indent=None, **kw: json.dumps(x, ensure_ascii=False, indent=indent)
    cases = []
    for name, family in TEMPLATES.items():
        template = env.from_string(open(os.path.join(folder, name), encoding="utf-8").read())
        for conv, messages in CONVERSATIONS.items():
            case = {"template": name, "family": family, "conversation": conv, "messages": messages}
            try:
                text = template.render(messages=messages, add_generation_prompt=True,
                                       bos_token="<BOS>", eos_token="<EOS>")
                case["text"] = text[len("<BOS>"):] if text.startswith("<BOS>") else text
            except jinja2.TemplateError as e:
                case["error"] = str(e)
            case["unsupported"] = family == "unsupported"
            cases.append(case)
    out = os.path.join(os.path.dirname(__file__), "..", "data", "chat_templates.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases written to {os.path.normpath(out)}", file=sys.stderr)


if __name__ == "__main__":
    main()
